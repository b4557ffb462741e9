package mcagent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/server"
	"github.com/santa-offload/santa/internal/protocol"
)

// fakeSantad is santad's state, which outlives connections (fakeConn): its
// services, their parsers, guarded rules and counters, the generations
// and hot sets the test sets.
type fakeSantad struct {
	mu       sync.Mutex
	services map[uint32]*fakeService
	nextID   uint32
	nextRule uint32
	epoch    uint32                       // of the newest domain started
	gens     map[string]client.Generation // by key; default: gen 1 of the newest epoch
	bumps    uint64                       // key bumps: one per setGen
	genReads map[string]int               // GENERATION calls, by key
	attaches int
	txns     int
	// quota, if not 0, is the rules a service may have: more are refused
	// (EDQUOT at the first rule over it), as santad's quotas do.
	quota int
	adds  int // ADD_RULES calls
}

type fakeService struct {
	info     client.ServiceInfo
	parser   client.Parser
	learning client.Learning
	hot      client.HotSet
	rules    map[uint32]client.RuleEntry
	hits     map[uint32]uint64
}

func newFakeSantad() *fakeSantad {
	return &fakeSantad{services: map[uint32]*fakeService{}, gens: map[string]client.Generation{}, genReads: map[string]int{}}
}

func (d *fakeSantad) conn() *fakeConn { return &fakeConn{d: d} }

// rules are a service's rules by key (their guard's).
func (d *fakeSantad) rules(id uint32) map[string]client.RuleEntry {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]client.RuleEntry{}
	if s := d.services[id]; s != nil {
		for _, e := range s.rules {
			out[string(e.Guard.Key)] = e
		}
	}
	return out
}

// setHot sets a service's hot set: passes of each request form, one
// window of a second.
func (d *fakeSantad) setHot(id uint32, passes map[string]uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var reqs []client.HotRequest
	for _, form := range slices.Sorted(maps.Keys(passes)) {
		reqs = append(reqs, client.HotRequest{Passes: passes[form], Key: []byte(form)})
	}
	d.services[id].hot = client.HotSet{Window: time.Second, Requests: reqs}
}

// setNumber numbers a service's hot set as santad's window n's (0:
// unnumbered, as from a santad of protocol version 4).
func (d *fakeSantad) setNumber(id uint32, n uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.services[id].hot.Number = n
}

func (d *fakeSantad) setGen(key string, g client.Generation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gens[key] = g
	d.bumps++
}

// fakeConn is a connection to the fake santad; broken, every call fails as
// a closed connection does.
type fakeConn struct {
	d      *fakeSantad
	broken bool
}

var errBroken = errors.New("santad closed the connection")

func refuse(errno syscall.Errno, format string, args ...any) error {
	e := protocol.Errorf(errno, format, args...)
	e.Index = client.NoIndex
	return e
}

// lock locks santad and finds service id (0 and !need: none needed).
func (c *fakeConn) lock(id uint32, need bool) (*fakeService, error) {
	c.d.mu.Lock()
	if c.broken {
		c.d.mu.Unlock()
		return nil, errBroken
	}
	s := c.d.services[id]
	if need && s == nil {
		c.d.mu.Unlock()
		return nil, refuse(syscall.ENOENT, "no service %d", id)
	}
	return s, nil
}

func (c *fakeConn) Services() ([]client.ServiceInfo, error) {
	if _, err := c.lock(0, false); err != nil {
		return nil, err
	}
	defer c.d.mu.Unlock()
	var out []client.ServiceInfo
	for _, id := range slices.Sorted(maps.Keys(c.d.services)) {
		out = append(out, c.d.services[id].info)
	}
	return out, nil
}

func (c *fakeConn) AttachFD(fd int) (client.ServiceInfo, error) {
	if _, err := c.lock(0, false); err != nil {
		return client.ServiceInfo{}, err
	}
	defer c.d.mu.Unlock()
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return client.ServiceInfo{}, err
	}
	typ, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	proto := uint8(syscall.IPPROTO_UDP)
	if typ == unix.SOCK_STREAM {
		proto = syscall.IPPROTO_TCP
	}
	id := c.d.nextID
	c.d.nextID++
	c.d.attaches++
	c.d.services[id] = &fakeService{info: client.ServiceInfo{ServiceID: id, Cookie: cookie, Protocol: proto, Manager: ClientName},
		rules: map[uint32]client.RuleEntry{}, hits: map[uint32]uint64{}}
	return c.d.services[id].info, nil
}

func (c *fakeConn) Detach(id uint32) error {
	if _, err := c.lock(id, true); err != nil {
		return err
	}
	defer c.d.mu.Unlock()
	delete(c.d.services, id)
	return nil
}

func (c *fakeConn) SetParser(id uint32, p client.Parser) error {
	s, err := c.lock(id, true)
	if err != nil {
		return err
	}
	defer c.d.mu.Unlock()
	if p.Domain == id {
		c.d.epoch++ // a new life
	} else if l := c.d.services[p.Domain]; l == nil || l.parser.Domain != p.Domain {
		return refuse(syscall.EINVAL, "service %d has not started domain %d", p.Domain, p.Domain)
	}
	s.parser = p
	return nil
}

func (c *fakeConn) SetLearning(id uint32, l client.Learning) error {
	s, err := c.lock(id, true)
	if err != nil {
		return err
	}
	defer c.d.mu.Unlock()
	s.learning = l
	return nil
}

func (c *fakeConn) Hot(id uint32, max int) (client.HotSet, error) {
	s, err := c.lock(id, true)
	if err != nil {
		return client.HotSet{}, err
	}
	defer c.d.mu.Unlock()
	return s.hot, nil
}

func (c *fakeConn) Generations(id uint32, keys [][]byte) ([]client.Generation, error) {
	s, err := c.lock(id, true)
	if err != nil {
		return nil, err
	}
	defer c.d.mu.Unlock()
	if s.parser.Kind != client.ParserMemcached {
		return nil, refuse(syscall.EINVAL, "service %d is not memcached's", id)
	}
	out := make([]client.Generation, len(keys))
	for i, key := range keys {
		c.d.genReads[string(key)]++
		g, ok := c.d.gens[string(key)]
		if !ok {
			g = client.Generation{Gen: 1, DomainGen: 1, Epoch: c.d.epoch}
		}
		out[i] = g
	}
	return out, nil
}

func (c *fakeConn) Rules(id uint32) iter.Seq2[client.RuleEntry, error] {
	return func(yield func(client.RuleEntry, error) bool) {
		s, err := c.lock(id, true)
		if err != nil {
			yield(client.RuleEntry{}, err)
			return
		}
		var entries []client.RuleEntry
		for _, rid := range slices.Sorted(maps.Keys(s.rules)) {
			entries = append(entries, s.rules[rid])
		}
		c.d.mu.Unlock()
		for _, e := range entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

func (c *fakeConn) RuleStats(id uint32) iter.Seq2[client.RuleCounters, error] {
	return func(yield func(client.RuleCounters, error) bool) {
		s, err := c.lock(id, true)
		if err != nil {
			yield(client.RuleCounters{}, err)
			return
		}
		var out []client.RuleCounters
		for _, rid := range slices.Sorted(maps.Keys(s.rules)) {
			out = append(out, client.RuleCounters{RuleID: rid, Hits: s.hits[rid]})
		}
		c.d.mu.Unlock()
		for _, rc := range out {
			if !yield(rc, nil) {
				return
			}
		}
	}
}

func (c *fakeConn) AddGuardedRules(id uint32, rs []client.GuardedRule) ([]uint32, error) {
	s, err := c.lock(id, true)
	if err != nil {
		return nil, err
	}
	defer c.d.mu.Unlock()
	c.d.adds++
	for i, r := range rs {
		if r.Guard == nil || r.Guard.Epoch == 0 {
			return nil, refuse(syscall.EINVAL, "a rule without a live guard")
		}
		if c.d.quota > 0 && len(s.rules)+i >= c.d.quota {
			e := protocol.Errorf(syscall.EDQUOT, "quota of %d rules exceeded", c.d.quota)
			e.Index = uint32(i)
			return nil, e
		}
	}
	var ids []uint32
	for _, r := range rs {
		s.rules[c.d.nextRule] = client.RuleEntry{RuleID: c.d.nextRule, Rule: r.Rule, Guard: r.Guard}
		ids = append(ids, c.d.nextRule)
		c.d.nextRule++
	}
	return ids, nil
}

func (c *fakeConn) DeleteRules(id uint32, ids []uint32) error {
	s, err := c.lock(id, true)
	if err != nil {
		return err
	}
	defer c.d.mu.Unlock()
	for _, rid := range ids {
		delete(s.rules, rid)
		delete(s.hits, rid)
	}
	return nil
}

func (c *fakeConn) Begin(id uint32) (Txn, error) {
	if _, err := c.lock(id, true); err != nil {
		return nil, err
	}
	defer c.d.mu.Unlock()
	return &fakeTxn{c: c, service: id}, nil
}

func (c *fakeConn) MemcachedStats(id uint32) (client.MemcachedStats, error) {
	s, err := c.lock(id, true)
	if err != nil {
		return client.MemcachedStats{}, err
	}
	defer c.d.mu.Unlock()
	if s.parser.Kind != client.ParserMemcached {
		return client.MemcachedStats{}, refuse(syscall.EINVAL, "service %d is not memcached's", id)
	}
	return client.MemcachedStats{Domain: s.parser.Domain, KeyBumps: c.d.bumps}, nil
}

func (c *fakeConn) Close() error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.broken = true
	return nil
}

type fakeTxn struct {
	c       *fakeConn
	service uint32
	replace []client.RuleEntry
}

func (t *fakeTxn) ReplaceRules(u []client.RuleEntry) error {
	t.replace = append(t.replace, u...)
	return nil
}

func (t *fakeTxn) DeleteRules(ids []uint32) error {
	return errors.New("the agent deletes no rule in a transaction")
}

func (t *fakeTxn) Abort() error { return nil }

func (t *fakeTxn) Commit() (int, error) {
	s, err := t.c.lock(t.service, true)
	if err != nil {
		return 0, err
	}
	defer t.c.d.mu.Unlock()
	for _, e := range t.replace {
		if _, ok := s.rules[e.RuleID]; !ok {
			return 0, refuse(syscall.ENOENT, "no rule %d", e.RuleID)
		}
	}
	for _, e := range t.replace {
		s.rules[e.RuleID] = e
		s.hits[e.RuleID] = 0
	}
	t.c.d.txns++
	return 0, nil
}

// fakeMemcached answers the agent's UDP gets and TCP reads from its items.
// A datagram count over 1 in big's replies stands for a value too large
// for one; padded's replies write the value's size with a leading 0 (a
// reply udpReply does not rebuild).
type fakeMemcached struct {
	mu     sync.Mutex
	items  map[string]item
	big    map[string]bool
	padded map[string]bool
	onRead func() // called as the TCP read is answered
	udp    int
	tcp    int // items read
	resets int
	// evictions is the eviction count stats tells, statsErr its error.
	evictions uint64
	statsErr  error
}

func newFakeMemcached() *fakeMemcached {
	return &fakeMemcached{items: map[string]item{}, big: map[string]bool{}, padded: map[string]bool{}}
}

func (m *fakeMemcached) set(key, value string, ttl int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[key] = item{flags: "0", data: []byte(value), ttl: ttl}
}

func (m *fakeMemcached) Port() uint16 { return 4242 }

func (m *fakeMemcached) Sent() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(m.udp)
}

func (m *fakeMemcached) Ask(ctx context.Context, dst netip.AddrPort, query []byte, timeout time.Duration) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.udp++
	key, _ := strings.CutPrefix(strings.TrimSuffix(string(query[frameLen:]), "\r\n"), "get ")
	reply := append([]byte{0x77, 0x88}, oneDatagram...)
	if m.big[key] {
		reply[5] = 2
	}
	it, ok := m.items[key]
	if !ok {
		return append(reply, "END\r\n"...), nil
	}
	size := strconv.Itoa(len(it.data))
	if m.padded[key] {
		size = "0" + size
	}
	return fmt.Appendf(reply, "VALUE %s %s %s\r\n%s\r\nEND\r\n", key, it.flags, size, it.data), nil
}

func (m *fakeMemcached) Read(ctx context.Context, dst netip.AddrPort, keys [][]byte, timeout time.Duration) ([]itemOrErr, error) {
	if m.onRead != nil {
		m.onRead()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tcp += len(keys)
	out := make([]itemOrErr, len(keys))
	for i, k := range keys {
		it, ok := m.items[string(k)]
		if !ok {
			out[i].err = skipf(skipMiss, "no %s", k)
		}
		out[i].it = it
	}
	return out, nil
}

func (m *fakeMemcached) Evictions(ctx context.Context, dst netip.AddrPort, timeout time.Duration) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evictions, m.statsErr
}

// evict drops key for room, with no write, as memcached counts it.
func (m *fakeMemcached) evict(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.items, key)
	m.evictions++
}

func (m *fakeMemcached) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resets++
}

// take duplicates a socket of this process.
func take(s server.Socket) (int, error) { return unix.Dup(s.Holder.FD) }
