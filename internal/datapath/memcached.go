package datapath

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// memcached invalidation (docs/memcached.md, "Invalidation"): marking a
// service's parser, the domains' lives, reading generations, and the
// guards of rules (written with their bodies, rulebody.go).

// guardLen is the bytes a guard takes at the end of its body's reply area.
const guardLen = int(unsafe.Sizeof(santaSantaGuard{}))

// mcSlot is santa_mc_slot_of (guard.h): the generation slot of key in
// domain, the key's FNV-1a 32 (what MC_EV_KEY carries) mixed with the
// domain as MurmurHash3's fmix32 finalizes.
func mcSlot(key []byte, domain model.ServiceID) uint32 {
	f := fnv.New32a()
	f.Write(key)
	h := f.Sum32() ^ uint32(domain)*0x9e3779b1
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h & (uint32(santaSantaMcLayoutSANTA_MC_SLOTS) - 1)
}

// SetParser sets how the data plane reads a service's requests. A
// memcached service whose Domain is itself starts that domain, each time
// a new life: guards of an earlier life never answer again (a domain dies
// when a service of it leaves, and its writes may have gone unseen since).
// One whose Domain is another service joins that one's, which must have
// started it; services that joined a domain stay in its next lives. A service that stops being parsed (ParserNone, or another
// domain) ends its domain's life. Connections its listener accepted
// before are lost sync while they live (docs/memcached.md).
//
// A UDP service marked memcached's has its replies seen on the cgroup
// hierarchy's egress (santa_mc_udp_reply, attached then, once), so that
// its writes are in flight until answered.
func (d *Datapath) SetParser(id model.ServiceID, p model.Parser) error {
	if p.Kind == model.ParserMemcached {
		info, err := d.store.service(id)
		if err != nil {
			return err
		}
		if info.Protocol == unix.IPPROTO_UDP {
			if err := d.mcReplies.attach(); err != nil {
				return err
			}
		}
	}
	return d.store.setParser(id, p)
}

// mcReplies is the hook that sees memcached's UDP replies: the egress of
// the cgroup hierarchy whose sockets Santa serves, attached once, before
// the first UDP service is marked memcached's (docs/memcached.md, "UDP
// writes in flight", says why there and not on devices).
type mcReplies struct {
	prog       *ebpf.Program
	pins       *pins
	cgroupPath string

	mu   sync.Mutex
	link link.Link // nil until attach
}

func (r *mcReplies) attach() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.link != nil {
		return nil
	}
	root, err := cgroup2Root(r.cgroupPath)
	if err != nil {
		return err
	}
	l, err := r.pins.attachToCgroup(root, "link_mc_udp_reply", ebpf.AttachCGroupInetEgress, r.prog)
	if err != nil {
		return fmt.Errorf("seeing memcached's UDP replies: %w", err)
	}
	r.link = l
	return nil
}

// close releases this process's link; a pinned one stays attached.
func (r *mcReplies) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.link != nil {
		r.link.Close()
		r.link = nil
	}
}

func (st *store) setParser(id model.ServiceID, p model.Parser) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	svc, ok := st.services[id]
	if !ok {
		return fmt.Errorf("service %d: %w", id, model.ErrUnknownService)
	}
	switch p.Kind {
	case model.ParserNone:
		p.Domain = 0
	case model.ParserMemcached:
		if p.Domain != id {
			leader, ok := st.services[p.Domain]
			if !ok || leader.parser != (model.Parser{Kind: model.ParserMemcached, Domain: p.Domain}) {
				return fmt.Errorf("service %d cannot join domain %d: no memcached service started it (SetParser with Domain %d on it first)",
					id, p.Domain, p.Domain)
			}
		}
	default:
		return fmt.Errorf("parser %d: %w", p.Kind, model.ErrNotSupported)
	}
	was := svc.parser
	svc.parser = p
	if err := st.objs.Services.Put(svc.info.Cookie, svc.value()); err != nil {
		svc.parser = was
		return fmt.Errorf("service %d: setting its parser: %w", id, err)
	}
	if was.Kind == model.ParserMemcached && was != p {
		st.endDomain(was.Domain)
		st.releaseID(was.Domain)
	}
	if p.Kind == model.ParserMemcached && p.Domain == id {
		// Parsed first, live then: no guard of this life can exist before
		// its writes are seen.
		st.mcEpoch++
		if err := st.objs.McLive.Put(uint32(id), st.mcEpoch); err != nil {
			return fmt.Errorf("service %d: starting its domain: %w", id, err)
		}
	}
	return nil
}

// releaseID returns the id of an ended service to the pool once no
// service is in its memcached domain any more. Called with st.mu held.
func (st *store) releaseID(id model.ServiceID) {
	if !st.endedIDs[id] {
		return
	}
	for _, svc := range st.services {
		if svc.parser.Kind == model.ParserMemcached && svc.parser.Domain == id {
			return
		}
	}
	delete(st.endedIDs, id)
	st.svcIDs.put(uint32(id))
}

// endDomain ends the life of a domain whose service is no longer parsed:
// writes to it may go unseen from now on. Called with st.mu held.
func (st *store) endDomain(domain model.ServiceID) {
	// A failure leaves a map write of an array in range failing: not seen.
	st.objs.McLive.Put(uint32(domain), uint32(0))
}

// Generation is what the data plane holds now for key in the domain of
// memcached service id: read it before reading the value from memcached,
// and guard the rule with it.
func (d *Datapath) Generation(id model.ServiceID, key []byte) (model.Generation, error) {
	if err := model.CheckMemcachedKey(key); err != nil {
		return model.Generation{}, err
	}
	domain, err := d.store.domainOf(id)
	if err != nil {
		return model.Generation{}, err
	}
	var (
		dom   santaSantaMcDomain
		slot  santaSantaMcSlot
		epoch uint32
	)
	// The domain's counts first: a write of the key that arrives in
	// between has bumped the slot by the time it is read.
	if err := d.objs.McLive.Lookup(uint32(domain), &epoch); err != nil {
		return model.Generation{}, fmt.Errorf("reading domain %d: %w", domain, err)
	}
	if err := d.readDomain(domain, &dom); err != nil {
		return model.Generation{}, err
	}
	at := mcSlot(key, domain)
	if err := d.objs.McSlots.Lookup(at, &slot); err != nil {
		return model.Generation{}, fmt.Errorf("reading a generation: %w", err)
	}
	g := model.Generation{Gen: slot.Gen, DomainGen: dom.Gen, Epoch: epoch,
		InFlight: slot.Inflight != 0 || dom.Inflight != 0 || dom.Unsynced != 0 || dom.HoldUntil != 0}
	if !g.InFlight {
		fresh, err := d.fresh(key, domain, at, slot.Gen)
		if err != nil {
			return model.Generation{}, err
		}
		g.Fresh = fresh
	}
	return g, nil
}

// readDomain reads a domain's state into dom. A hold whose time has
// passed is ended first (santa_mc_settle_domain bumps the domain, then
// clears it), as a guard read in the kernel would: a domain no request
// reads does not stay held.
func (d *Datapath) readDomain(domain model.ServiceID, dom *santaSantaMcDomain) error {
	if err := d.objs.McDomains.Lookup(uint32(domain), dom); err != nil {
		return fmt.Errorf("reading domain %d: %w", domain, err)
	}
	if dom.HoldUntil == 0 || monotonicNow() < dom.HoldUntil {
		return nil
	}
	args := santaSantaMcSettleArgs{Domain: uint32(domain)}
	if _, err := d.objs.SantaMcSettleDomain.Run(&ebpf.RunOptions{Context: args}); err != nil {
		return fmt.Errorf("ending the hold of domain %d: %w", domain, err)
	}
	if err := d.objs.McDomains.Lookup(uint32(domain), dom); err != nil {
		return fmt.Errorf("reading domain %d: %w", domain, err)
	}
	return nil
}

// domainOf is the domain of memcached service id.
func (st *store) domainOf(id model.ServiceID) (model.ServiceID, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	svc, ok := st.services[id]
	if !ok {
		return 0, fmt.Errorf("service %d: %w", id, model.ErrUnknownService)
	}
	if svc.parser.Kind != model.ParserMemcached {
		return 0, fmt.Errorf("service %d: %w", id, model.ErrNotMemcached)
	}
	return svc.parser.Domain, nil
}

// MemcachedStats reads the counters of the domain of memcached service id.
func (d *Datapath) MemcachedStats(id model.ServiceID) (model.MemcachedStats, error) {
	domain, err := d.store.domainOf(id)
	if err != nil {
		return model.MemcachedStats{}, err
	}
	var per []santaSantaMcStats
	if err := d.objs.McStats.Lookup(uint32(domain), &per); err != nil {
		return model.MemcachedStats{}, fmt.Errorf("reading memcached counters: %w", err)
	}
	var s model.MemcachedStats
	for _, c := range per {
		s.Writes += c.N[santaSantaMcCounterSANTA_MC_WRITES]
		s.KeyBumps += c.N[santaSantaMcCounterSANTA_MC_KEY_BUMPS]
		s.DomainBumps += c.N[santaSantaMcCounterSANTA_MC_DOMAIN_BUMPS]
		s.Completed += c.N[santaSantaMcCounterSANTA_MC_COMPLETED]
		s.Released += c.N[santaSantaMcCounterSANTA_MC_RELEASED]
		s.Overflow += c.N[santaSantaMcCounterSANTA_MC_OVERFLOW]
		s.Lost += c.N[santaSantaMcCounterSANTA_MC_LOST]
		s.GuardStale += c.N[santaSantaMcCounterSANTA_MC_GUARD_STALE]
		s.GuardInFlight += c.N[santaSantaMcCounterSANTA_MC_GUARD_INFLIGHT]
		s.GuardExpired += c.N[santaSantaMcCounterSANTA_MC_GUARD_EXPIRED]
		s.UDPHeld += c.N[santaSantaMcCounterSANTA_MC_UDP_HELD]
		s.UDPTimedOut += c.N[santaSantaMcCounterSANTA_MC_UDP_TIMED_OUT]
		s.UDPDomain += c.N[santaSantaMcCounterSANTA_MC_UDP_DOMAIN]
		s.DelayedFlush += c.N[santaSantaMcCounterSANTA_MC_DELAYED_FLUSH]
		s.Refreshed += c.N[santaSantaMcCounterSANTA_MC_REFRESHED]
		s.FreshTorn += c.N[santaSantaMcCounterSANTA_MC_FRESH_TORN]
		s.Filled += c.N[santaSantaMcCounterSANTA_MC_FILLED]
	}
	return s, nil
}

// guardOf is g as the data plane keeps it for a rule of svc. Called with
// st.mu held.
func (st *store) guardOf(svc *service, g *model.Guard) (*santaSantaGuard, error) {
	if svc.parser.Kind != model.ParserMemcached {
		return nil, fmt.Errorf("a guarded rule on service %d: %w", svc.id, model.ErrNotMemcached)
	}
	domain := svc.parser.Domain
	var live uint32
	if err := st.objs.McLive.Lookup(uint32(domain), &live); err != nil {
		return nil, fmt.Errorf("reading domain %d: %w", domain, err)
	}
	if g.At.Epoch == 0 || g.At.Epoch != live {
		return nil, fmt.Errorf("%w: a guard of life %d of domain %d, which is at life %d: read its generations again",
			model.ErrStaleGuard, g.At.Epoch, domain, live)
	}
	v := &santaSantaGuard{Domain: uint32(domain), Epoch: g.At.Epoch, Slot: uint32(santaSantaMcLayoutSANTA_MC_NO_SLOT),
		Gen: g.At.Gen, DomainGen: g.At.DomainGen}
	if g.Key != nil {
		if err := model.CheckMemcachedKey(g.Key); err != nil {
			return nil, err
		}
		v.Slot = mcSlot(g.Key, domain)
	}
	if !g.Expires.IsZero() {
		v.Deadline = monotonicAt(g.Expires)
	}
	return v, nil
}

// monotonicAt is t on CLOCK_MONOTONIC in nanoseconds (bpf_ktime_get_ns's
// clock), at least 1: a deadline already past.
func monotonicAt(t time.Time) uint64 {
	at := int64(monotonicNow()) + int64(time.Until(t))
	return uint64(max(at, 1))
}

// monotonicNow is bpf_ktime_get_ns's clock now.
func monotonicNow() uint64 {
	var now unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	return uint64(now.Nano())
}

// putGuard writes g at the end of a body's reply area.
func putGuard(reply []byte, g *santaSantaGuard) {
	b := reply[len(reply)-guardLen:]
	binary.NativeEndian.PutUint64(b[0:], g.Deadline)
	binary.NativeEndian.PutUint32(b[8:], g.Domain)
	binary.NativeEndian.PutUint32(b[12:], g.Epoch)
	binary.NativeEndian.PutUint32(b[16:], g.Slot)
	binary.NativeEndian.PutUint32(b[20:], g.Gen)
	binary.NativeEndian.PutUint32(b[24:], g.DomainGen)
	binary.NativeEndian.PutUint32(b[28:], g.Flags)
}
