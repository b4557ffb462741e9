// Package datapath loads Santa's UDP data plane, attaches it to interfaces
// and keeps its maps in step with the services and rules that user space
// registers. It is the one package that talks to the kernel through
// cilium/ebpf.
package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
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
type Datapath struct {
	objs       santaObjects
	tcp        tcpObjects
	tcpHooks   []link.Link // root cgroup links of the TCP programs, once a TCP listener is registered
	cgroupPath string
	pinPath    string
	barrier    *barrier
	links      map[string][]link.Link // by interface; pinned ones outlive this process

	mu       sync.Mutex
	services map[model.ServiceID]*service
	rules    map[model.RuleID]*installedRule
	svcIDs   idPool
	ruleIDs  idPool
	reserved map[model.RuleID]bool // rule ids taken by ReserveRuleIDs, not yet landed
	slots    [ruleClasses]idPool   // slot numbers by size class
	chunks   [hugeRule]chunks      // bodies of the UDP classes
	index    *indexTable           // where each rule_index entry lies
	indexIDs uint32
	pending  retiredRules // waiting for a grace period, see reclaim.go

	watcher *socketWatcher // nil until WatchSockets
	addrs   *localAddrs    // the host's addresses, followed from Open to Close

	previous *ebpf.Map         // an earlier process's services (KeepLinks), until EndRestore
	prevTCP  *connMaps         // an earlier process's connections, until HandOverConnections
	restored []model.ServiceID // what RestoreService brought back

	kick      chan struct{} // wakes reclaimLoop
	reclaimed chan struct{} // closed when reclaimLoop has finished
}

// Open loads the data plane. Pinned maps of an earlier run are replaced: a
// new Datapath starts with no services and no rules.
func Open(opts Options) (*Datapath, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("removing memlock limit: %w", err)
	}
	if opts.MaxRules == 0 {
		opts.MaxRules = 1 << 20
	}
	if opts.MaxRules >= 1<<slotClassShift {
		return nil, fmt.Errorf("a rule capacity of %d is too large: a slot number has %d bits", opts.MaxRules, slotClassShift)
	}
	if opts.MaxServices == 0 {
		opts.MaxServices = 4096
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 65536
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

	spec, err := loadSanta()
	if err != nil {
		return nil, fmt.Errorf("loading BPF spec: %w", err)
	}
	spec.Maps["services"].MaxEntries = opts.MaxServices
	spec.Maps["service_stats"].MaxEntries = opts.MaxServices
	for _, m := range chunkedClassMaps {
		sizeChunks(spec, m, opts.MaxRules)
	}
	spec.Maps["rules_huge"].MaxEntries = opts.MaxRules
	index := newIndexTable(indexPositions(opts.MaxRules))
	spec.Maps["rule_index"].MaxEntries = uint32(len(index.keys))
	spec.Maps["rule_stats"].MaxEntries = opts.MaxRules
	if err := spec.Variables["santa_reply_ttl"].Set(opts.ReplyTTL); err != nil {
		return nil, fmt.Errorf("setting reply TTL: %w", err)
	}
	if err := index.setMask(spec); err != nil {
		return nil, err
	}

	d := &Datapath{
		cgroupPath: opts.CgroupPath,
		links:      make(map[string][]link.Link),
		services:   make(map[model.ServiceID]*service),
		rules:      make(map[model.RuleID]*installedRule),
		svcIDs:     newIDPool(0, opts.MaxServices),
		ruleIDs:    newIDPool(0, opts.MaxRules),
		reserved:   make(map[model.RuleID]bool),
		index:      index,
	}
	for c := range d.slots {
		// Slot 0 means "no candidate" in index nodes.
		d.slots[c] = newIDPool(1, opts.MaxRules+1)
	}
	if err := loadOnto(spec, &d.objs, nil, "BPF objects"); err != nil {
		return nil, err
	}
	outers := [hugeRule]*ebpf.Map{smallRule: d.objs.RulesSmall, mediumRule: d.objs.RulesMedium, largeRule: d.objs.RulesLarge}
	for c, name := range chunkedClassMaps {
		d.chunks[c] = newChunks(outers[c], spec.Maps[name])
	}
	if err := d.loadTCP(opts.MaxConnections, opts.MaxServices); err != nil {
		d.objs.Close()
		return nil, err
	}
	if d.barrier, err = newBarrier(); err != nil {
		d.tcp.Close()
		d.objs.Close()
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if d.addrs, err = followLocalAddrs(d.objs.LocalAddrs, opts.Log); err != nil {
		d.barrier.Close()
		d.tcp.Close()
		d.objs.Close()
		return nil, fmt.Errorf("reading the host's addresses: %w", err)
	}
	d.kick, d.reclaimed = make(chan struct{}, 1), make(chan struct{})
	go d.reclaimLoop()
	if !opts.NoPin {
		if err := d.pin(opts.PinPath, opts.KeepLinks); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// pin makes maps and programs outlive this process, replacing older pins.
func (d *Datapath) pin(dir string, keepLinks bool) error {
	if err := mountBPFFS(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating pin directory: %w", err)
	}
	d.keepPreviousTCP(dir)
	if keepLinks {
		if err := d.keepPrevious(dir); err != nil {
			return err
		}
	} else if err := detachStale(dir); err != nil {
		return err
	}
	pins := map[string]interface{ Pin(string) error }{
		"services": d.objs.Services, "rule_index": d.objs.RuleIndex,
		"rules_small": d.objs.RulesSmall, "rules_medium": d.objs.RulesMedium, "rules_large": d.objs.RulesLarge,
		"rules_huge": d.objs.RulesHuge,
		"rule_stats": d.objs.RuleStats, "service_stats": d.objs.ServiceStats,
		"path_stats": d.objs.PathStats, "closed_sockets": d.objs.ClosedSockets,
		"connections": d.tcp.Connections, "listeners": d.tcp.Listeners, "tcp_conns": d.tcp.TcpConns,
		"tcp_path_stats": d.tcp.TcpPathStats,
		"prog_santa_udp": d.objs.SantaUdp, "prog_santa_udp_tc": d.objs.SantaUdpTc,
		"prog_santa_sock_release": d.objs.SantaSockRelease, "prog_santa_tcp_sockops": d.tcp.SantaTcpSockops,
		"prog_santa_tcp_accepted": d.tcp.SantaTcpAccepted,
		"prog_santa_tcp_verdict":  d.tcp.SantaTcpVerdict, "prog_santa_tcp_reply": d.tcp.SantaTcpReply,
	}
	for name, obj := range pins {
		p := filepath.Join(dir, name)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing old pin %s: %w", p, err)
		}
		if err := obj.Pin(p); err != nil {
			return fmt.Errorf("pinning %s: %w", name, err)
		}
	}
	d.pinPath = dir
	return removeOldPins(dir)
}

// oldPins are the pins earlier versions made that this one does not: the
// single rules map before the size classes.
var oldPins = []string{"rules"}

// removeOldPins removes what earlier versions pinned in dir and this one
// no longer does: those maps would otherwise keep their memory, gigabytes
// at a million rules, for as long as the pin lives. Only known names go:
// the directory may be shared.
func removeOldPins(dir string) error {
	var errs []error
	for _, name := range oldPins {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing old pin: %w", err))
		}
	}
	return errors.Join(errs...)
}

// detachStale removes links an earlier process pinned (it may have been
// killed): they still run that process's programs with its rules, and hold
// the interfaces' XDP hooks.
func detachStale(dir string) error {
	stale, err := filepath.Glob(filepath.Join(dir, "link_*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range stale {
		errs = append(errs, unpinLink(p))
	}
	return errors.Join(errs...)
}

// Close releases this process's handles. Pinned objects and pinned links
// stay: the data plane keeps answering until Unpin.
func (d *Datapath) Close() error {
	d.stopWatching()
	if d.addrs != nil {
		d.addrs.stop()
	}
	d.EndRestore()
	if d.prevTCP != nil {
		d.prevTCP.Close()
	}
	if d.kick != nil {
		close(d.kick)
		<-d.reclaimed
	}
	if d.barrier != nil {
		d.barrier.Close()
	}
	for _, ls := range d.links {
		closeLinks(ls)
	}
	closeLinks(d.tcpHooks)
	errs := []error{d.tcp.Close(), d.objs.Close()}
	for c := range d.chunks {
		errs = append(errs, d.chunks[c].Close())
	}
	return errors.Join(errs...)
}

// Unpin removes every pin under the pin path, links included, so that the
// data plane goes away once the last handle is closed.
func (d *Datapath) Unpin() error {
	if d.pinPath == "" {
		return nil
	}
	if err := os.RemoveAll(d.pinPath); err != nil {
		return fmt.Errorf("removing pins: %w", err)
	}
	d.pinPath = ""
	return nil
}

// XDPProgram and TCPPrograms give the benchmarks the programs to run
// (BPF_PROG_TEST_RUN, or attached to a sockmap of their own).
func (d *Datapath) XDPProgram() *ebpf.Program { return d.objs.SantaUdp }
func (d *Datapath) TCPPrograms() (verdict, reply *ebpf.Program) {
	return d.tcp.SantaTcpVerdict, d.tcp.SantaTcpReply
}
