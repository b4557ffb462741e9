package datapath

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// Loading the data plane: santa_udp's programs and the maps every program
// shares, sized by Options; santa_tcp's programs on those maps (and its
// own); and the user-space mirrors sized with them.

// loaded is what load made; Open hands it out to the parts.
type loaded struct {
	udp    santaObjects
	tcp    tcpObjects
	index  *indexTable      // rule_index's positions
	chunks [hugeRule]chunks // the UDP classes' rule bodies
}

// load loads both objects with opts' sizes (defaults applied): the maps
// first, then every program of both at once (loadPrograms). listeners, if
// not nil, is an earlier process's registered_listeners, which santa_tcp
// uses instead of a new one (previousListeners).
func load(opts Options, listeners *ebpf.Map) (*loaded, error) {
	l := &loaded{index: newIndexTable(indexPositions(opts.MaxRules))}
	cache := btf.NewCache()
	udp, tcp, err := l.loadAllMaps(opts, listeners, cache)
	if err != nil {
		return nil, err
	}
	defer udp.coll.Close()
	defer tcp.coll.Close()
	if err := loadPrograms(cache, udp, tcp); err != nil {
		return nil, err
	}
	if err := udp.coll.Assign(&l.udp); err != nil {
		return nil, fmt.Errorf("BPF objects: %w", err)
	}
	if err := tcp.coll.Assign(&l.tcp); err != nil {
		l.udp.Close()
		return nil, fmt.Errorf("TCP BPF objects: %w", err)
	}
	if err := l.attachTCP(); err != nil {
		l.tcp.Close()
		l.udp.Close()
		return nil, err
	}
	outers := [hugeRule]*ebpf.Map{smallRule: l.udp.RulesSmall, mediumRule: l.udp.RulesMedium, largeRule: l.udp.RulesLarge}
	for c, name := range chunkedClassMaps {
		l.chunks[c] = newChunks(outers[c], udp.spec.Maps[name])
	}
	return l, nil
}

// loadAllMaps loads the maps of santa_udp, then those of santa_tcp (most
// of which are santa_udp's, and registered_listeners may be an earlier
// process's), sized by opts.
func (l *loaded) loadAllMaps(opts Options, listeners *ebpf.Map, cache *btf.Cache) (udp, tcp *objectFile, err error) {
	spec, err := l.udpSpec(opts)
	if err != nil {
		return nil, nil, err
	}
	tcpSpec, err := l.tcpSpec(opts.MaxConnections, opts.MaxServices)
	if err != nil {
		return nil, nil, err
	}
	if udp, err = loadMaps(spec, nil, "BPF objects", cache); err != nil {
		return nil, nil, err
	}
	shared := map[string]*ebpf.Map{}
	for _, name := range tcpShared {
		shared[name] = udp.coll.Maps[name]
	}
	if listeners != nil {
		shared["registered_listeners"] = listeners
	}
	if tcp, err = loadMaps(tcpSpec, shared, "TCP BPF objects", cache); err != nil {
		udp.coll.Close()
		return nil, nil, err
	}
	return udp, tcp, nil
}

// udpSpec is santa_udp's spec, sized by opts.
func (l *loaded) udpSpec(opts Options) (*ebpf.CollectionSpec, error) {
	spec, err := loadSanta()
	if err != nil {
		return nil, fmt.Errorf("loading BPF spec: %w", err)
	}
	spec.Maps["services"].MaxEntries = opts.MaxServices
	spec.Maps["service_stats"].MaxEntries = opts.MaxServices
	spec.Maps["mc_domains"].MaxEntries = opts.MaxServices
	spec.Maps["mc_stats"].MaxEntries = opts.MaxServices
	spec.Maps["mc_live"].MaxEntries = opts.MaxServices
	spec.Maps["mc_conns"].MaxEntries = opts.MaxConnections
	for _, m := range chunkedClassMaps {
		sizeChunks(spec, m, opts.MaxRules)
	}
	spec.Maps["rules_huge"].MaxEntries = opts.MaxRules
	spec.Maps["slot_gens"].MaxEntries = slotGenEntries(opts.MaxRules)
	spec.Maps["rule_index"].MaxEntries = uint32(len(l.index.keys))
	spec.Maps["rule_stats"].MaxEntries = opts.MaxRules
	if err := spec.Variables["santa_reply_ttl"].Set(opts.ReplyTTL); err != nil {
		return nil, fmt.Errorf("setting reply TTL: %w", err)
	}
	if err := l.index.setMask(spec); err != nil {
		return nil, err
	}
	if err := setLearnSeed(spec); err != nil {
		return nil, err
	}
	spec.Maps["learn_samples"].MaxEntries = learnRingBytes(ebpf.MustPossibleCPU())
	return spec, nil
}

// tcpShared are the maps santa_tcp shares with santa_udp.
var tcpShared = []string{
	"services", "rule_index", "rules_small", "rules_medium", "rules_large", "rules_huge",
	"slot_gens", "rule_stats", "service_stats", "mc_slots", "mc_domains", "mc_stats", "mc_live",
	"mc_conns", "mc_udp_state", "mc_fresh", "mc_mortal",
}

// tcpSpec is santa_tcp's spec, sized for maxConns connections under
// Santa, of listeners of at most maxServices uids (and slot 0).
func (l *loaded) tcpSpec(maxConns, maxServices uint32) (*ebpf.CollectionSpec, error) {
	spec, err := loadSantaTcp()
	if err != nil {
		return nil, fmt.Errorf("loading TCP BPF spec: %w", err)
	}
	spec.Maps["connections"].MaxEntries = maxConns
	spec.Maps["tcp_conns"].MaxEntries = maxConns
	spec.Maps["conn_owners"].MaxEntries = maxServices + 1
	if err := l.index.setMask(spec); err != nil {
		return nil, err
	}
	return spec, nil
}

// attachTCP attaches the TCP verdict and reply programs to the
// connections' sockhash.
func (l *loaded) attachTCP() error {
	for _, a := range []struct {
		prog   *ebpf.Program
		attach ebpf.AttachType
	}{{l.tcp.SantaTcpVerdict, ebpf.AttachSkSKBVerdict}, {l.tcp.SantaTcpReply, ebpf.AttachSkMsgVerdict}} {
		err := link.RawAttachProgram(link.RawAttachProgramOptions{Target: l.tcp.TcpConns.FD(), Program: a.prog, Attach: a.attach})
		if err != nil {
			return fmt.Errorf("attaching %s to the connections sockhash: %w", a.prog, err)
		}
	}
	return nil
}

// objectFile is one object file's spec and its maps, loaded, to which
// loadPrograms adds its programs.
type objectFile struct {
	spec  *ebpf.CollectionSpec
	coll  *ebpf.Collection
	what  string              // names the objects in errors
	progs ebpf.ProgramOptions // how its programs load (a test asks for the verifier's statistics)
}

// loadMaps loads spec's maps, with those named in shared replaced by them
// (sized as they are).
func loadMaps(spec *ebpf.CollectionSpec, shared map[string]*ebpf.Map, what string, cache *btf.Cache) (*objectFile, error) {
	if err := sizeShared(spec, shared); err != nil {
		return nil, err
	}
	maps := spec.Copy()
	maps.Programs = nil
	coll, err := ebpf.NewCollectionWithOptions(maps, ebpf.CollectionOptions{MapReplacements: shared, Cache: cache})
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", what, err)
	}
	coll.Programs = map[string]*ebpf.Program{}
	return &objectFile{spec: spec, coll: coll, what: what}, nil
}

// loadPrograms loads every program of files onto their maps, each on a
// goroutine of its own. The kernel's verifier checks a program on the CPU
// that loads it, and it is most of santad's start: about 3 s of CPU on
// the machine of docs/benchmarks.md, a second or so for each of
// santa_udp, santa_udp_tc and santa_tcp_verdict (docs/operations.md).
func loadPrograms(cache *btf.Cache, files ...*objectFile) error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, f := range files {
		for name := range f.spec.Programs {
			wg.Go(func() {
				p, err := f.loadProgram(name, cache)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				f.coll.Programs[name] = p
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadProgram loads the program name of f onto f's maps.
func (f *objectFile) loadProgram(name string, cache *btf.Cache) (*ebpf.Program, error) {
	one := f.spec.Copy()
	one.Programs = map[string]*ebpf.ProgramSpec{name: one.Programs[name]}
	coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: f.coll.Maps, Programs: f.progs, Cache: cache})
	if err != nil {
		return nil, loadError(f.what, err)
	}
	defer coll.Close()
	return coll.DetachProgram(name), nil
}

// loadOnto loads spec's objects into objs, with the maps named in shared
// replaced by those (sized as they are). what names the objects in errors.
// Unlike loadMaps, it creates only the maps objs's programs use: the
// handover's object declares most maps of the data plane and uses a few
// (its rule_stats alone, a per-CPU array of 1M entries, would take half a
// second and 16 MiB a CPU).
func loadOnto(spec *ebpf.CollectionSpec, objs any, shared map[string]*ebpf.Map, what string) error {
	if err := sizeShared(spec, shared); err != nil {
		return err
	}
	if err := spec.LoadAndAssign(objs, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		return loadError(what, err)
	}
	return nil
}

// sizeShared sizes spec's maps named in shared as those are.
func sizeShared(spec *ebpf.CollectionSpec, shared map[string]*ebpf.Map) error {
	for name, m := range shared {
		info, err := m.Info()
		if err != nil {
			return fmt.Errorf("reading map %s: %w", name, err)
		}
		spec.Maps[name].MaxEntries = info.MaxEntries
	}
	return nil
}

// loadError is err, of loading what, with the verifier's whole log if it
// is the verifier's.
func loadError(what string, err error) error {
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		return fmt.Errorf("loading %s: %+v", what, verr)
	}
	return fmt.Errorf("loading %s: %w", what, err)
}

// tcpObjects are the TCP programs and the maps only they use; the maps
// they share with santa_udp are santaObjects' (tcpShared).
type tcpObjects struct {
	santaTcpPrograms
	Connections         *ebpf.Map `ebpf:"connections"`
	RegisteredListeners *ebpf.Map `ebpf:"registered_listeners"` // socket storage (tcpPlane.addListener)
	TcpConns            *ebpf.Map `ebpf:"tcp_conns"`
	TcpPathStats        *ebpf.Map `ebpf:"tcp_path_stats"`
	ReplyMemory         *ebpf.Map `ebpf:"reply_memory"`
	ConnOwners          *ebpf.Map `ebpf:"conn_owners"` // connplaces.go
}

func (o *tcpObjects) Close() error {
	return errors.Join(o.santaTcpPrograms.Close(), o.Connections.Close(), o.RegisteredListeners.Close(),
		o.TcpConns.Close(), o.TcpPathStats.Close(), o.ReplyMemory.Close(), o.ConnOwners.Close())
}

// setLearnSeed seeds the learning sketch's hash from a random source.
func setLearnSeed(spec *ebpf.CollectionSpec) error {
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return fmt.Errorf("seeding the learning sketch: %w", err)
	}
	if err := spec.Variables["santa_learn_seed"].Set(binary.NativeEndian.Uint64(seed[:])); err != nil {
		return fmt.Errorf("seeding the learning sketch: %w", err)
	}
	return nil
}
