package datapath

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
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

// load loads both objects with opts' sizes (defaults applied).
func load(opts Options) (*loaded, error) {
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
	l := &loaded{index: newIndexTable(indexPositions(opts.MaxRules))}
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
	if err := loadOnto(spec, &l.udp, nil, "BPF objects"); err != nil {
		return nil, err
	}
	outers := [hugeRule]*ebpf.Map{smallRule: l.udp.RulesSmall, mediumRule: l.udp.RulesMedium, largeRule: l.udp.RulesLarge}
	for c, name := range chunkedClassMaps {
		l.chunks[c] = newChunks(outers[c], spec.Maps[name])
	}
	if err := l.loadTCP(opts.MaxConnections, opts.MaxServices); err != nil {
		l.udp.Close()
		return nil, err
	}
	return l, nil
}

// loadTCP loads the TCP programs onto l's maps and attaches verdict and
// reply to the sockhash. maxConns bounds the connections under Santa.
func (l *loaded) loadTCP(maxConns, maxServices uint32) error {
	spec, err := loadSantaTcp()
	if err != nil {
		return fmt.Errorf("loading TCP BPF spec: %w", err)
	}
	spec.Maps["connections"].MaxEntries = maxConns
	spec.Maps["tcp_conns"].MaxEntries = maxConns
	spec.Maps["listeners"].MaxEntries = maxServices
	if err := l.index.setMask(spec); err != nil {
		return err
	}
	shared := map[string]*ebpf.Map{
		"services": l.udp.Services, "rule_index": l.udp.RuleIndex,
		"rules_small": l.udp.RulesSmall, "rules_medium": l.udp.RulesMedium,
		"rules_large": l.udp.RulesLarge, "rules_huge": l.udp.RulesHuge,
		"rule_stats": l.udp.RuleStats, "service_stats": l.udp.ServiceStats,
		"mc_slots": l.udp.McSlots, "mc_domains": l.udp.McDomains, "mc_stats": l.udp.McStats, "mc_live": l.udp.McLive,
		"mc_conns": l.udp.McConns, "mc_udp_state": l.udp.McUdpState, "mc_fresh": l.udp.McFresh,
		"mc_mortal": l.udp.McMortal,
	}
	if err := loadOnto(spec, &l.tcp, shared, "TCP BPF objects"); err != nil {
		return err
	}
	for _, a := range []struct {
		prog   *ebpf.Program
		attach ebpf.AttachType
	}{{l.tcp.SantaTcpVerdict, ebpf.AttachSkSKBVerdict}, {l.tcp.SantaTcpReply, ebpf.AttachSkMsgVerdict}} {
		err := link.RawAttachProgram(link.RawAttachProgramOptions{Target: l.tcp.TcpConns.FD(), Program: a.prog, Attach: a.attach})
		if err != nil {
			l.tcp.Close()
			return fmt.Errorf("attaching %s to the connections sockhash: %w", a.prog, err)
		}
	}
	return nil
}

// loadOnto loads spec's objects into objs, with the maps named in shared
// replaced by those (sized as they are). what names the objects in errors.
func loadOnto(spec *ebpf.CollectionSpec, objs any, shared map[string]*ebpf.Map, what string) error {
	for name, m := range shared {
		info, err := m.Info()
		if err != nil {
			return fmt.Errorf("reading map %s: %w", name, err)
		}
		spec.Maps[name].MaxEntries = info.MaxEntries
	}
	if err := spec.LoadAndAssign(objs, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return fmt.Errorf("loading %s: %+v", what, verr)
		}
		return fmt.Errorf("loading %s: %w", what, err)
	}
	return nil
}

// tcpObjects are the TCP programs and the maps only they use; the maps
// they share with santa_udp are santaObjects' (loadTCP).
type tcpObjects struct {
	santaTcpPrograms
	Connections  *ebpf.Map `ebpf:"connections"`
	Listeners    *ebpf.Map `ebpf:"listeners"`
	TcpConns     *ebpf.Map `ebpf:"tcp_conns"`
	TcpPathStats *ebpf.Map `ebpf:"tcp_path_stats"`
	ReplyMemory  *ebpf.Map `ebpf:"reply_memory"`
}

func (o *tcpObjects) Close() error {
	return errors.Join(o.santaTcpPrograms.Close(), o.Connections.Close(), o.Listeners.Close(),
		o.TcpConns.Close(), o.TcpPathStats.Close(), o.ReplyMemory.Close())
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
