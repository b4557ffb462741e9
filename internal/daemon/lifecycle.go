package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/sdnotify"
)

// Reload is how santad is asked to re-read its configuration: each value
// on Requests (SIGHUP, in cmd/santad) calls Load and applies what it
// returns (Server.Reload). The zero Reload never reloads.
type Reload struct {
	Requests <-chan os.Signal
	Load     func() (Config, error)
}

// serveSignals runs until ctx is done: it reloads when asked to and, if
// systemd's watchdog is on (WatchdogSec=), sends a keep-alive as often as
// systemd asks, after taking the server's locks: a santad stuck holding
// one stops answering systemd too, which then restarts it (the data
// plane keeps answering meanwhile).
func (s *Server) serveSignals(ctx context.Context, reload Reload, log *slog.Logger) {
	every, err := sdnotify.WatchdogInterval()
	if err != nil {
		log.Warn("no watchdog keep-alives", "err", err)
	}
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			s.alive()
			notify(log, sdnotify.Watchdog)
		case <-reload.Requests:
			// systemd >= 253 wants the time of the request with RELOADING=1.
			var now unix.Timespec
			unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
			notify(log, fmt.Sprintf("%s\nMONOTONIC_USEC=%d", sdnotify.Reloading, now.Nano()/1000))
			s.reload(reload.Load, log)
			notify(log, sdnotify.Ready)
		}
	}
}

// alive returns once no request holds the server's locks.
func (s *Server) alive() {
	s.mu.Lock()
	s.mu.Unlock()
	s.connMu.Lock()
	s.connMu.Unlock()
}

// reload loads the configuration and applies it, logging what it did.
func (s *Server) reload(load func() (Config, error), log *slog.Logger) {
	cfg, err := load()
	if err == nil {
		var restart []string
		if restart, err = s.Reload(cfg); err == nil {
			log.Info("configuration reloaded", "restart_needed_for", restart)
			return
		}
	}
	log.Error("reload refused; the running configuration stays", "err", err)
}

// notify tells systemd state, if santad runs under it.
func notify(log *slog.Logger, state string) {
	if err := sdnotify.Notify(state); err != nil {
		log.Warn("notifying systemd", "state", state, "err", err)
	}
}
