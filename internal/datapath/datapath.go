// Package datapath loads Santa's data plane (the UDP, TCP and handover
// programs), attaches it to interfaces and keeps its maps in step with the
// services and rules that user space registers. It is the one package that
// talks to the kernel through cilium/ebpf.
package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/santa-offload/santa/internal/model"
)

// Options configure Open. Zero values take the defaults.
type Options struct {
	// PinPath is a directory on bpffs for maps, programs and links. Empty:
	// model.DefaultPinPath. NoPin: nothing is pinned (tests, benchmarks).
	PinPath string
	NoPin   bool
	// MaxRules is the host's rule capacity (default 1,048,576).
	MaxRules uint32
	// MaxServices bounds registered sockets (default 4096).
	MaxServices uint32
	// MaxConnections bounds the TCP connections of registered listeners
	// that the data plane serves at once (default 65536); connections
	// beyond it are the application's alone.
	MaxConnections uint32
	// CgroupPath is the cgroup v2 hierarchy whose TCP connections can be
	// served (default model.DefaultCgroupPath, the whole host).
	CgroupPath string
	// ReplyTTL is the IPv4 TTL / IPv6 hop limit of replies (default 64).
	ReplyTTL uint8
	// KeepLinks is for a restarting daemon: the links an earlier process
	// pinned stay attached, running its programs and maps, until Attach and
	// WatchSockets take them over or DetachStale removes them; and its
	// services can be restored (RestoreService). Otherwise Open detaches
	// them and starts from nothing.
	KeepLinks bool
	// Log receives what goes wrong in the background (default: discarded).
	Log *slog.Logger
}

// Datapath is a loaded data plane. Its methods are safe for concurrent use.
//
// It is made of parts with one job each, and a lock each where they keep
// state of their own:
//   - the loaded objects (load.go), fixed from Open to Close, and where
//     they are pinned (pins.go, bpffs.go);
//   - ifaces (attach.go): the interfaces' XDP and TC links;
//   - store (store.go and the files it names): services and rules, and
//     everything that places them in the maps;
//   - tcp (tcp.go, handover.go): listeners, their connections, the TCP
//     hooks and the handover from an earlier process;
//   - restore (restore.go): an earlier process's services, while they
//     are restored;
//   - the learner (learn.go, service_learn.go): what the learning
//     services pass, window by window;
//   - watcher (lifetime.go): the sockets that close, and addrs
//     (localaddrs.go): the host's addresses, each in a goroutine of its
//     own.
//
// Locks are taken in this order, never the other way round: watchMu
// (RestoreService holds it: no restore once sockets are watched),
// restore's, the store's (it tells the TCP plane of TCP listeners), the TCP plane's,
// the pin path's. The interfaces' lock is taken alone, and callbacks
// (WatchSockets' closed) run with no lock held.
type Datapath struct {
	objs      santaObjects // the programs and the maps they share
	pins      *pins
	mcReplies *mcReplies // memcached's UDP replies (memcached.go)
	pinLock   *os.File   // the pin path, locked from Open to Close (lockPinPath)
	// hostBPFFS is the pin path's parent under ip netns exec, held open
	// from Open to Close: the pin path is named through it (hostPinPath).
	hostBPFFS *os.File
	ifaces    *ifaceLinks
	store     *store
	tcp       *tcpPlane
	restore   *restoring
	stats     statsBuffers
	addrs     *localAddrs // the host's addresses, followed from Open to Close
	netns     netnsID     // the namespace Open ran in, whose addresses addrs are

	watchMu sync.Mutex
	watcher *socketWatcher // nil until WatchSockets
}

// Open loads the data plane. Pinned maps of an earlier run are replaced: a
// new Datapath starts with no services and no rules. Without the
// capabilities it needs, its error says which.
func Open(opts Options) (*Datapath, error) {
	d, err := open(opts)
	if err != nil {
		return nil, explainCaps(err)
	}
	return d, nil
}

func open(opts Options) (*Datapath, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("removing memlock limit: %w", err)
	}
	if opts.MaxRules == 0 {
		opts.MaxRules = model.DefaultMaxRules
	}
	if opts.MaxRules >= 1<<slotClassShift {
		return nil, fmt.Errorf("a rule capacity of %d is too large: a slot number has %d bits", opts.MaxRules, slotClassShift)
	}
	if opts.MaxServices == 0 {
		opts.MaxServices = model.DefaultMaxServices
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = model.DefaultMaxConnections
	}
	if opts.CgroupPath == "" {
		opts.CgroupPath = model.DefaultCgroupPath
	}
	if opts.ReplyTTL == 0 {
		opts.ReplyTTL = 64
	}
	if opts.PinPath == "" && !opts.NoPin {
		opts.PinPath = model.DefaultPinPath
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}

	d := &Datapath{pins: &pins{}}
	var dir string
	var listeners *ebpf.Map
	if !opts.NoPin {
		var err error
		if dir, err = d.lockPins(opts.PinPath, opts.Log); err != nil {
			d.closePinPath()
			return nil, err
		}
		if opts.KeepLinks {
			listeners = previousListeners(dir, opts.Log)
		}
	}
	l, err := load(opts, listeners)
	if listeners != nil {
		listeners.Close() // santa_tcp has a copy of its own
	}
	if err != nil {
		d.closePinPath()
		return nil, err
	}
	d.objs = l.udp
	d.ifaces = newIfaceLinks(&d.objs, d.pins)
	d.mcReplies = &mcReplies{prog: d.objs.SantaMcUdpReply, pins: d.pins, cgroupPath: opts.CgroupPath}
	if d.tcp, err = newTCPPlane(l.tcp, d.objs.Services, d.pins, opts.CgroupPath); err != nil {
		l.tcp.Close()
		d.objs.Close()
		d.closePinPath()
		return nil, err
	}
	if d.store, err = newStore(&d.objs, d.tcp, l.index, l.chunks, opts.MaxServices, opts.MaxRules); err != nil {
		d.tcp.close()
		d.objs.Close()
		d.closePinPath()
		return nil, err
	}
	if d.store.learn, err = newLearner(&d.objs, opts.Log); err != nil {
		d.store.close()
		d.tcp.close()
		d.objs.Close()
		d.closePinPath()
		return nil, err
	}
	d.restore = &restoring{store: d.store}
	if d.netns, err = threadNetns(); err == nil {
		d.addrs, err = followLocalAddrs(d.objs.LocalAddrs, opts.Log)
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("reading the host's addresses: %w", err)
	}
	if !opts.NoPin {
		if err := d.pin(dir, opts.KeepLinks); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// lockPins makes the pin path dir, as this process names it (hostPinPath),
// and locks it (lockPinPath), before anything is loaded: an earlier
// process's registered_listeners is loaded from there. closePinPath lets
// go of it if Open fails before Close can.
func (d *Datapath) lockPins(dir string, log *slog.Logger) (string, error) {
	dir, held, err := hostPinPath(dir, log)
	if err != nil {
		return "", err
	}
	d.hostBPFFS = held
	if err := prepare(dir); err != nil {
		return "", err
	}
	if d.pinLock, err = lockPinPath(dir); err != nil {
		return "", err
	}
	return dir, nil
}

func (d *Datapath) closePinPath() {
	for _, f := range []*os.File{d.pinLock, d.hostBPFFS} {
		if f != nil {
			f.Close()
		}
	}
}

// previousListeners is the registered_listeners map an earlier process
// pinned in dir, if this version can use it, or nil. The listeners it
// registered carry their cookies in that map's storage, which is on their
// sockets and not in the map's pin: santad holds no fd of them, and cannot
// set them again in a new map when it restores them (RestoreService).
// Without it (none pinned: the first start, or an earlier version that
// found listeners by address), the restored listeners' new connections
// are the applications' alone until they are registered again.
func previousListeners(dir string, log *slog.Logger) *ebpf.Map {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "registered_listeners"), nil)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("the earlier run's registered TCP listeners cannot be read: their new connections are not served until they are attached again", "err", err)
		}
		return nil
	}
	spec, err := loadSantaTcp()
	if err == nil {
		err = spec.Maps["registered_listeners"].Compatible(m)
	}
	if err != nil {
		m.Close()
		log.Warn("the earlier run's registered TCP listeners are in a map of another shape: their new connections are not served until they are attached again", "err", err)
		return nil
	}
	return m
}

// pin makes maps and programs outlive this process in dir (lockPins),
// replacing older pins, after holding on to what the parts take over from
// an earlier process.
func (d *Datapath) pin(dir string, keepLinks bool) error {
	d.tcp.keepPrevious(dir)
	if keepLinks {
		d.restore.keepPrevious(dir)
	} else if err := detachStale(dir); err != nil {
		return err
	}
	return d.pins.pinObjects(dir, &d.objs, &d.tcp.objs)
}

// Close releases this process's handles. Pinned objects and pinned links
// stay: the data plane keeps answering until Unpin.
func (d *Datapath) Close() error {
	d.watchMu.Lock()
	w := d.watcher
	d.watcher = nil
	d.watchMu.Unlock()
	// Stopped without the lock: stop waits for a closed callback under way,
	// and callbacks run with no lock of the data path held.
	if w != nil {
		w.stop()
	}
	if d.addrs != nil {
		d.addrs.stop()
	}
	d.EndRestore()
	d.store.learn.close()
	errs := []error{d.store.close()}
	d.ifaces.close()
	d.mcReplies.close()
	errs = append(errs, d.tcp.close(), d.objs.Close())
	d.closePinPath()
	return errors.Join(errs...)
}

// Unpin removes every pin under the pin path, links included, so that the
// data plane goes away once the last handle is closed.
func (d *Datapath) Unpin() error { return d.pins.remove() }

// XDPProgram and TCPPrograms give the benchmarks the programs to run
// (BPF_PROG_TEST_RUN, or attached to a sockmap of their own).
func (d *Datapath) XDPProgram() *ebpf.Program { return d.objs.SantaUdp }
func (d *Datapath) TCPPrograms() (verdict, reply *ebpf.Program) {
	return d.tcp.objs.SantaTcpVerdict, d.tcp.objs.SantaTcpReply
}
