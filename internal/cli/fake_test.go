package cli

import (
	"cmp"
	"slices"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/protocol/protocoltest"
	"github.com/santa-offload/santa/rule"
)

// fake is a small santad: services with rules and counters, changed only
// through transactions, as santactl changes them.
type fake struct {
	mu          sync.Mutex
	services    map[uint32]*fakeService
	txns        map[uint32]*fakeTxn
	nextService uint32
	nextRule    uint32
	nextTxn     uint32
	cookies     []uint64 // SO_COOKIE of each socket attached
	addRequests int      // ADD_RULES requests received
	client      string   // the name HELLO gave
	// paths are PATH_STATS' reply; nil: refused, as an older santad does.
	paths []protocol.PathCount
}

type fakeService struct {
	info     client.ServiceInfo
	stats    client.ServiceStats
	rules    []client.RuleEntry // by rising id
	counters map[uint32]client.RuleCounters
	learning *protocol.Learn   // the last LEARN
	hot      protocol.HotReply // what HOT answers while it learns
	parser   *protocol.Parser  // the last PARSER
}

type fakeTxn struct {
	service uint32
	adds    []rule.Rule
	addIDs  []uint32 // given out when staged, as santad does
	deletes []uint32
}

// fakePage is the most items a LIST_SERVICES, LIST_RULES or RULE_STATS
// page holds, so that every listing of more than two takes several pages.
const fakePage = 2

// newFake serves a fake santad on a unixpacket socket in a temporary
// directory and returns it with the socket's path.
func newFake(t *testing.T) (*fake, string) {
	f := &fake{services: map[uint32]*fakeService{}, txns: map[uint32]*fakeTxn{}, nextService: 7, nextRule: 1, nextTxn: 1}
	// Encoded under f.mu too: the reply shares the fake's rules, and
	// Encode writes to the processors it encodes.
	path := protocoltest.Serve(t, &f.mu, f.handle)
	return f, path
}

// addService installs a service with rules, as if attached and added to.
func (f *fake) addService(info client.ServiceInfo, stats client.ServiceStats, rs ...rule.Rule) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	info.ServiceID = f.nextService
	f.nextService++
	s := &fakeService{info: info, stats: stats, counters: map[uint32]client.RuleCounters{}}
	f.services[info.ServiceID] = s
	ids := make([]uint32, len(rs))
	for i := range ids {
		ids[i] = f.newRuleID()
	}
	f.install(s, rs, ids)
	return info.ServiceID
}

// setCounters sets a rule's counters.
func (f *fake) setCounters(service uint32, rc client.RuleCounters) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.services[service].counters[rc.RuleID] = rc
}

// bump adds to a rule's counters, as traffic would.
func (f *fake) bump(service, id uint32, hits, bytes uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rc := f.services[service].counters[id]
	rc.Hits += hits
	rc.Bytes += bytes
	f.services[service].counters[id] = rc
}

// rulesOf is a copy of a service's rules.
func (f *fake) rulesOf(service uint32) []client.RuleEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.services[service].rules)
}

// install puts rules rs in s under ids.
func (f *fake) install(s *fakeService, rs []rule.Rule, ids []uint32) {
	for i, r := range rs {
		// A copy of its own, as santad keeps: the fakes of different
		// tests would otherwise encode the same processors.
		r.Processors = slices.Clone(r.Processors)
		s.rules = append(s.rules, client.RuleEntry{RuleID: ids[i], Rule: r})
		s.counters[ids[i]] = client.RuleCounters{RuleID: ids[i]}
	}
}

// newRuleID is the next rule id.
func (f *fake) newRuleID() uint32 {
	f.nextRule++
	return f.nextRule - 1
}

// handle answers a request; f.mu is held.
func (f *fake) handle(req protocol.Body, fds []int) protocol.Body {
	switch req := req.(type) {
	case *protocol.Hello:
		f.client = req.Client
		v := min(req.MaxVersion, protocol.MaxVersion)
		return &protocol.HelloReply{Version: v, UID: 1000, GID: 100, PID: 4242, QuotaRules: 65536, Daemon: "santad test"}
	case *protocol.Learn:
		s := f.services[req.ServiceID]
		if s == nil {
			return protocol.Errorf(syscall.ENOENT, "no service %d", req.ServiceID)
		}
		s.learning = req
		return &protocol.LearnReply{}
	case *protocol.Hot:
		s := f.services[req.ServiceID]
		switch {
		case s == nil:
			return protocol.Errorf(syscall.ENOENT, "no service %d", req.ServiceID)
		case s.learning == nil || !s.learning.Enable:
			return protocol.Errorf(syscall.EINVAL, "service %d: learning is off: LEARN turns it on", req.ServiceID)
		}
		r := s.hot
		r.Requests = r.Requests[:min(int(req.Max), len(r.Requests))]
		return &r
	case *protocol.Parser:
		s := f.services[req.ServiceID]
		if s == nil {
			return protocol.Errorf(syscall.ENOENT, "no service %d", req.ServiceID)
		}
		s.parser = req
		return &protocol.ParserReply{}
	case *protocol.Generation:
		if _, perr := f.memcached(req.ServiceID); perr != nil {
			return perr
		}
		return &protocol.GenerationReply{Gen: uint32(len(req.Key)), DomainGen: 2, Epoch: 1, InFlight: true}
	case *protocol.MemcachedStats:
		p, perr := f.memcached(req.ServiceID)
		if perr != nil {
			return perr
		}
		return &protocol.MemcachedStatsReply{Domain: p.Domain, Writes: 40, KeyBumps: 80, Completed: 39, Lost: 1, GuardStale: 3}
	case *protocol.Attach:
		return f.attach(fds)
	case *protocol.Detach:
		if f.services[req.ServiceID] == nil {
			return protocol.Errorf(syscall.ENOENT, "no service %d", req.ServiceID)
		}
		delete(f.services, req.ServiceID)
		return &protocol.DetachReply{}
	case *protocol.Begin:
		if f.services[req.ServiceID] == nil {
			return protocol.Errorf(syscall.ENOENT, "no service %d", req.ServiceID)
		}
		id := f.nextTxn
		f.nextTxn++
		f.txns[id] = &fakeTxn{service: req.ServiceID}
		return &protocol.BeginReply{Txn: id}
	case *protocol.AddRules:
		f.addRequests++
		return f.addRules(req)
	case *protocol.DeleteRules:
		return f.deleteRules(req)
	case *protocol.Commit:
		return f.commit(req.Txn)
	case *protocol.Abort:
		delete(f.txns, req.Txn)
		return &protocol.AbortReply{}
	case *protocol.ListServices:
		// In pages of fakePage, as santad's (version 7) are of more.
		var all []client.ServiceInfo
		for _, s := range f.services {
			info := s.info
			info.Rules = uint32(len(s.rules))
			all = append(all, info)
		}
		slices.SortFunc(all, func(a, b client.ServiceInfo) int { return cmp.Compare(a.ServiceID, b.ServiceID) })
		r := &protocol.ListServicesReply{Next: protocol.LastPage}
		for _, info := range all {
			if info.ServiceID < req.Start {
				continue
			}
			if len(r.Services) == fakePage {
				r.Next = info.ServiceID
				break
			}
			r.Services = append(r.Services, info)
		}
		return r
	case *protocol.ListRules:
		s := f.services[req.ServiceID]
		if s == nil {
			return protocol.Errorf(syscall.ENOENT, "no service %d", req.ServiceID)
		}
		page, next := s.page(req.Start)
		return &protocol.ListRulesReply{Next: next, Rules: page}
	case *protocol.RuleStats:
		s := f.services[req.ServiceID]
		if s == nil {
			return protocol.Errorf(syscall.ENOENT, "no service %d", req.ServiceID)
		}
		page, next := s.page(req.Start)
		r := &protocol.RuleStatsReply{Next: next}
		for _, e := range page {
			r.Counters = append(r.Counters, s.counters[e.RuleID])
		}
		return r
	case *protocol.ServiceStats:
		s := f.services[req.ServiceID]
		if s == nil {
			return protocol.Errorf(syscall.ENOENT, "no service %d", req.ServiceID)
		}
		stats := s.stats
		stats.Rules = uint32(len(s.rules))
		return &stats
	case *protocol.PathStats:
		if f.paths != nil {
			return &protocol.PathStatsReply{Paths: f.paths}
		}
	case *protocol.Status:
		return &protocol.StatusReply{Daemon: "santad test", Rules: 3, Capacity: 1048576, Services: uint32(len(f.services)),
			Interfaces: []client.Interface{{Ifindex: 1, Name: "lo", XDP: "generic"}, {Ifindex: 4, Name: "eth0", XDP: "native", TC: true}}}
	}
	return protocol.Errorf(syscall.EPROTO, "the fake does not do %v", req.Type())
}

// memcached is the parser of memcached service id, or santad's refusal.
func (f *fake) memcached(id uint32) (*protocol.Parser, *protocol.Error) {
	s := f.services[id]
	if s == nil || s.parser == nil || s.parser.Kind != protocol.ParserMemcached {
		return nil, protocol.Errorf(syscall.EINVAL, "service %d is not a memcached service: PARSER marks it one", id)
	}
	return s.parser, nil
}

// attach registers the socket received, as santad does: by its cookie and
// local address.
func (f *fake) attach(fds []int) protocol.Body {
	if len(fds) != 1 {
		return protocol.Errorf(syscall.EBADF, "%d fds", len(fds))
	}
	cookie, err := unix.GetsockoptUint64(fds[0], unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return protocol.Errorf(syscall.ENOTSOCK, "%v", err)
	}
	sa, err := unix.Getsockname(fds[0])
	if err != nil {
		return protocol.Errorf(syscall.EOPNOTSUPP, "%v", err)
	}
	proto, err := unix.GetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err != nil {
		return protocol.Errorf(syscall.ENOTSOCK, "%v", err)
	}
	info := client.ServiceInfo{ServiceID: f.nextService, Protocol: uint8(proto), Cookie: cookie, OwnerUID: 1000, Manager: f.client}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		info.Family, info.Port = 4, uint16(sa.Port)
		copy(info.Addr[:], sa.Addr[:])
	case *unix.SockaddrInet6:
		info.Family, info.Port, info.Addr = 6, uint16(sa.Port), sa.Addr
	}
	f.nextService++
	f.cookies = append(f.cookies, cookie)
	f.services[info.ServiceID] = &fakeService{info: info, counters: map[uint32]client.RuleCounters{}}
	return &info
}

// addRules holds rules in a transaction, refusing a condition the service
// or the transaction has already, as santad does.
func (f *fake) addRules(req *protocol.AddRules) protocol.Body {
	txn, s, perr := f.open(req.Txn, req.ServiceID)
	if perr != nil {
		return perr
	}
	for i, r := range req.Rules {
		if err := r.Validate(rule.DefaultUDPLimits); err != nil {
			return protocol.ErrorAt(syscall.EINVAL, uint32(i), "%v", err)
		}
		same := func(o rule.Rule) bool { return o.Condition.Overlaps(r.Condition) }
		if slices.ContainsFunc(txn.adds, same) || slices.ContainsFunc(s.rules, func(e client.RuleEntry) bool { return same(e.Rule) }) {
			return protocol.ErrorAt(syscall.EEXIST, uint32(i), "a rule has the condition %q at %d already", r.Condition.Pattern, r.Condition.Offset)
		}
		txn.adds = append(txn.adds, r)
		txn.addIDs = append(txn.addIDs, f.newRuleID())
	}
	return &protocol.AddRulesReply{RuleIDs: txn.addIDs[len(txn.addIDs)-len(req.Rules):]}
}

// open is transaction id on service, and the service.
func (f *fake) open(id, service uint32) (*fakeTxn, *fakeService, *protocol.Error) {
	txn := f.txns[id]
	if txn == nil || txn.service != service {
		return nil, nil, protocol.Errorf(syscall.ENOENT, "no transaction %d on service %d", id, service)
	}
	return txn, f.services[service], nil
}

func (f *fake) deleteRules(req *protocol.DeleteRules) protocol.Body {
	txn, s, perr := f.open(req.Txn, req.ServiceID)
	if perr != nil {
		return perr
	}
	for i, id := range req.RuleIDs {
		if s.find(id) < 0 {
			return protocol.ErrorAt(syscall.ENOENT, uint32(i), "no rule %d", id)
		}
	}
	txn.deletes = append(txn.deletes, req.RuleIDs...)
	return &protocol.DeleteRulesReply{}
}

func (f *fake) commit(id uint32) protocol.Body {
	txn := f.txns[id]
	if txn == nil {
		return protocol.Errorf(syscall.ENOENT, "no transaction %d", id)
	}
	delete(f.txns, id)
	s := f.services[txn.service]
	for _, id := range txn.deletes {
		if i := s.find(id); i >= 0 {
			s.rules = slices.Delete(s.rules, i, i+1)
			delete(s.counters, id)
		}
	}
	f.install(s, txn.adds, txn.addIDs)
	return &protocol.CommitReply{Added: uint32(len(txn.adds))}
}

func (s *fakeService) find(id uint32) int {
	return slices.IndexFunc(s.rules, func(e client.RuleEntry) bool { return e.RuleID == id })
}

// page is up to fakePage rules from id start on, and the next page's start.
func (s *fakeService) page(start uint32) ([]client.RuleEntry, uint32) {
	i := slices.IndexFunc(s.rules, func(e client.RuleEntry) bool { return e.RuleID >= start })
	if i < 0 {
		return nil, protocol.LastPage
	}
	end := min(i+fakePage, len(s.rules))
	if end == len(s.rules) {
		return s.rules[i:end], protocol.LastPage
	}
	return s.rules[i:end], s.rules[end].RuleID
}
