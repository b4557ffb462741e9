package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/flock"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/sdnotify"
)

// Run is santad: it loads the data plane with open (taking over an earlier
// run's, with its services and rules, if the state directory holds a
// journal), attaches it, and serves clients until ctx is done. On return
// the data plane stays pinned and keeps answering; the next Run takes it
// over. reload says when to re-read the configuration (SIGHUP).
func Run(ctx context.Context, cfg Config, open OpenPlane, log *slog.Logger, reload Reload) error {
	if err := cfg.check(); err != nil {
		return err
	}
	unlock, err := lockState(cfg.StateDir)
	if err != nil {
		return err
	}
	defer unlock()
	j, saved, err := journal.Open(cfg.StateDir)
	if damaged := (*journal.CorruptError)(nil); errors.As(err, &damaged) {
		// Refusing loses nothing: an earlier run's data plane stays pinned
		// and answering with all its rules. Restoring the records before
		// the damage would take the acknowledged ones after it out of the
		// kernel, without a word to their clients.
		log.Error("refusing to start: the journal is damaged; a data plane left pinned keeps answering", "path", damaged.Path, "offset", damaged.Offset,
			"size", damaged.Size, "good_records", damaged.Records, "reason", damaged.Reason)
	}
	if err != nil {
		return err
	}
	defer j.Close()
	if saved.Torn != "" {
		log.Warn("cut off the journal's torn end: what a crash leaves of a change never acknowledged",
			"what", saved.Torn, "offset", saved.TornAt, "bytes", saved.Ignored)
	}
	// With a journal, the earlier run's links keep answering with its
	// maps until this run has restored the rules and takes them over.
	dp, err := open(saved.Existed)
	if err != nil {
		return fmt.Errorf("opening the data plane: %w", err)
	}
	defer dp.Close()
	netns, err := ownNetns()
	if err != nil {
		return err
	}
	srv, err := NewServer(dp, j, cfg, netns, log)
	if err != nil {
		return err
	}
	// Restored before the sockets are watched: until WatchSockets replaces
	// the earlier run's santa_sock_release, that program marks a socket
	// closed meanwhile in the earlier services map, where EndRestore looks.
	// Watched first, a socket closed before its service was restored would
	// be seen by neither program, and its service would live on.
	if saved.Existed {
		services, rules := srv.Restore(dp, saved.Services)
		log.Info("restored", "services", services, "rules", rules, "journaled_services", len(saved.Services))
	}
	if err := dp.WatchSockets(cfg.CgroupPath, srv.SocketClosed); err != nil {
		return fmt.Errorf("watching sockets: %w", err)
	}
	ifaces, err := attachInterfaces(dp, cfg.Interfaces, log)
	if err != nil {
		return err
	}
	srv.setInterfaces(ifaces)
	if err := dp.DetachStale(); err != nil {
		log.Warn("detaching an earlier run's links", "err", err)
	}
	for _, id := range dp.EndRestore() {
		srv.dropped(id)
	}
	if got, err := dp.HandOverConnections(); err != nil {
		log.Warn("handing over the earlier run's TCP connections", "err", err)
	} else if got != (model.HandOver{}) {
		log.Info("took over the earlier run's TCP connections", "moved", got.Moved,
			"released", got.Released, "left_passing", got.Left)
		if got.Left > 0 {
			// Stopped and waited for before the data plane is closed.
			done := make(chan struct{})
			defer func() { <-done }()
			releaseCtx, stop := context.WithCancel(ctx)
			defer stop()
			go func() {
				defer close(done)
				releaseLeft(releaseCtx, dp, log)
			}()
		}
	}
	if err := srv.Snapshot(); err != nil {
		return err
	}

	l, err := listen(cfg)
	if err != nil {
		return err
	}
	defer l.Close()
	if cfg.MetricsAddr != "" {
		stop, err := srv.serveMetrics(cfg.MetricsAddr)
		if err != nil {
			return err
		}
		defer stop()
	}
	srv.serving.Store(true)
	go srv.Accept(l)
	notify(log, sdnotify.Ready)
	log.Info("ready", "socket", cfg.Socket, "interfaces", names(ifaces), "state_dir", cfg.StateDir,
		"pin_path", cfg.PinPath, "metrics", cfg.MetricsAddr, "version", srv.version)

	srv.serveSignals(ctx, reload, log)
	notify(log, sdnotify.Stopping)
	srv.serving.Store(false)
	l.Close()
	srv.closeConns()
	log.Info("stopped; the data plane keeps answering")
	return nil
}

// releaseLeftEvery is how often santad gives the connections the handover
// left in the earlier data plane back to their applications, once idle.
const releaseLeftEvery = 10 * time.Second

// releaseLeft releases the connections the handover left, as they become
// idle, until none is left or ctx is done: the earlier data plane, rules
// and all, lives as long as one of them is in it.
func releaseLeft(ctx context.Context, dp Plane, log *slog.Logger) {
	tick := time.NewTicker(releaseLeftEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		got, err := dp.ReleaseLeftConnections()
		if err != nil {
			log.Warn("releasing the TCP connections left in the earlier data plane", "err", err)
			return
		}
		if got.Released > 0 || got.Left == 0 {
			log.Info("released TCP connections left in the earlier data plane", "released", got.Released,
				"still_left", got.Left)
		}
		if got.Left == 0 {
			return
		}
	}
}

// lockState makes sure one santad at a time uses a state directory: two
// would write one journal. It refuses a directory others could have put a
// journal in (openStateDir), and a lock file that is a symbolic link.
func lockState(dir string) (unlock func(), err error) {
	d, err := openStateDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	path := filepath.Join(dir, "lock")
	fd, err := unix.Openat(int(d.Fd()), "lock", unix.O_CREAT|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("opening lock file: %s is a symbolic link; santad does not follow it: remove it", path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	if err := flock.Lock(f); err != nil {
		f.Close()
		if held := (*flock.HeldError)(nil); errors.As(err, &held) {
			return nil, fmt.Errorf("the state directory %s is in use by %s", dir, held.Holder("another santad"))
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}

// ownNetns is the cookie of santad's network namespace: the one whose
// sockets it can serve.
func ownNetns() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("reading the network namespace: %w", err)
	}
	defer unix.Close(fd)
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, fmt.Errorf("reading the network namespace: %w", err)
	}
	return cookie, nil
}

// names lists interfaces for the log.
func names(ifaces []protocol.Interface) string {
	var out []string
	for _, i := range ifaces {
		out = append(out, i.Name)
	}
	return strings.Join(out, ",")
}
