package agent

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// fakeDaemon is santad's state, which outlives connections (fakeConn): its
// services, rules and counters, the hot sets the test sets, and a log of
// the batches received.
type fakeDaemon struct {
	mu       sync.Mutex
	services map[uint32]*fakeService
	nextID   uint32
	hot      map[uint32]HotSet
	learning map[uint32]Learning
	batches  []string
	// statsFail fails reading the rules' counters, alone, after the
	// first rule's, as a connection that breaks there does.
	statsFail bool
	version   uint16 // the protocol version it speaks; 0: the newest
	learnErr  error  // what LEARN gives, if not nil
	counted   uint32 // the hot sets' counted_ppm (0: not told)
	// afterAdd, if set, is called after each ADD_RULES, without d.mu.
	afterAdd func()
	// quota, if not 0, is the rules a service may have: more are refused
	// (EDQUOT at the first rule over it), as santad's quotas do.
	quota int
}

type fakeService struct {
	info     client.ServiceInfo
	rules    map[uint32]rule.Rule
	hits     map[uint32]uint64
	nextRule uint32
}

func newFakeDaemon() *fakeDaemon {
	return &fakeDaemon{services: map[uint32]*fakeService{}, hot: map[uint32]HotSet{}, learning: map[uint32]Learning{}}
}

// conn is a new connection.
func (d *fakeDaemon) conn() *fakeConn { return &fakeConn{d: d} }

func (d *fakeDaemon) logf(format string, args ...any) {
	d.batches = append(d.batches, fmt.Sprintf(format, args...))
}

// takeBatches returns the batches logged since the last call.
func (d *fakeDaemon) takeBatches() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.batches
	d.batches = nil
	return b
}

// rules is a service's rules by pattern.
func (d *fakeDaemon) rules(id uint32) map[string]rule.Rule {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]rule.Rule{}
	if s := d.services[id]; s != nil {
		for _, r := range s.rules {
			out[string(r.Condition.Pattern)] = r
		}
	}
	return out
}

// hit adds n hits to the rule matching pattern on service id.
func (d *fakeDaemon) hit(id uint32, pattern []byte, n uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for rid, r := range d.services[id].rules {
		if string(r.Condition.Pattern) == string(pattern) {
			d.services[id].hits[rid] += n
		}
	}
}

// failStats makes reading the rules' counters fail, or work again.
func (d *fakeDaemon) failStats(fail bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.statsFail = fail
}

// failLearning makes LEARN give err, or work again (nil).
func (d *fakeDaemon) failLearning(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.learnErr = err
}

func (d *fakeDaemon) setHot(id uint32, reqs ...HotRequest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hot[id] = HotSet{Window: 1e9, CountedPPM: d.counted, Requests: reqs}
}

// setWindow numbers every hot set as santad's window n's (0: unnumbered,
// as from a santad of protocol version 4).
func (d *fakeDaemon) setWindow(n uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, h := range d.hot {
		h.Number = n
		d.hot[id] = h
	}
}

// end ends a service, as santa_sock_release does when its socket closes.
func (d *fakeDaemon) end(id uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.services, id)
}

// fakeConn is a connection to the fake daemon; broken, every call fails
// as a closed connection does.
type fakeConn struct {
	d      *fakeDaemon
	broken bool
}

var errBroken = errors.New("santad closed the connection")

func refuse(errno syscall.Errno, index uint32, format string, args ...any) error {
	e := protocol.Errorf(errno, format, args...)
	e.Index = index
	return e
}

func (c *fakeConn) lock() (*fakeDaemon, error) {
	c.d.mu.Lock()
	if c.broken {
		c.d.mu.Unlock()
		return nil, errBroken
	}
	return c.d, nil
}

func (c *fakeConn) service(id uint32) (*fakeService, error) {
	s := c.d.services[id]
	if s == nil {
		return nil, refuse(syscall.ENOENT, client.NoIndex, "no service %d", id)
	}
	return s, nil
}

// Session is a connection of the newest protocol version, unless the
// daemon is made older.
func (c *fakeConn) Session() client.Session {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return client.Session{Version: cmp.Or(c.d.version, protocol.MaxVersion)}
}

func (c *fakeConn) Status() (client.Status, error) {
	d, err := c.lock()
	if err != nil {
		return client.Status{}, err
	}
	defer d.mu.Unlock()
	return client.Status{Services: uint32(len(d.services))}, nil
}

func (c *fakeConn) Services() ([]client.ServiceInfo, error) {
	d, err := c.lock()
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	var out []client.ServiceInfo
	for _, id := range slices.Sorted(maps.Keys(d.services)) {
		out = append(out, d.services[id].info)
	}
	return out, nil
}

func (c *fakeConn) AttachFD(fd int) (client.ServiceInfo, error) {
	d, err := c.lock()
	if err != nil {
		return client.ServiceInfo{}, err
	}
	defer d.mu.Unlock()
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return client.ServiceInfo{}, err
	}
	for _, s := range d.services {
		if s.info.Cookie == cookie {
			return client.ServiceInfo{}, refuse(syscall.EEXIST, client.NoIndex, "attached already")
		}
	}
	d.nextID++
	s := &fakeService{info: client.ServiceInfo{ServiceID: d.nextID, Protocol: 17, Cookie: cookie},
		rules: map[uint32]rule.Rule{}, hits: map[uint32]uint64{}}
	d.services[d.nextID] = s
	return s.info, nil
}

func (c *fakeConn) Detach(id uint32) error {
	d, err := c.lock()
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if _, err := c.service(id); err != nil {
		return err
	}
	delete(d.services, id)
	d.logf("detach %d", id)
	return nil
}

func (c *fakeConn) SetLearning(id uint32, l Learning) error {
	d, err := c.lock()
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if _, err := c.service(id); err != nil {
		return err
	}
	if d.learnErr != nil {
		return d.learnErr
	}
	d.learning[id] = l
	return nil
}

func (c *fakeConn) Hot(id uint32, max int) (HotSet, error) {
	d, err := c.lock()
	if err != nil {
		return HotSet{}, err
	}
	defer d.mu.Unlock()
	if _, err := c.service(id); err != nil {
		return HotSet{}, err
	}
	h, ok := d.hot[id]
	if !ok {
		h = d.hot[0] // every service's
	}
	h.Requests = h.Requests[:min(max, len(h.Requests))]
	return h, nil
}

func (c *fakeConn) Rules(id uint32) iter.Seq2[client.RuleEntry, error] {
	return eachRule(c, id, func(s *fakeService, rid uint32) client.RuleEntry {
		return client.RuleEntry{RuleID: rid, Rule: s.rules[rid]}
	})
}

func (c *fakeConn) RuleStats(id uint32) iter.Seq2[client.RuleCounters, error] {
	all := eachRule(c, id, func(s *fakeService, rid uint32) client.RuleCounters {
		return client.RuleCounters{RuleID: rid, Hits: s.hits[rid]}
	})
	c.d.mu.Lock()
	fail := c.d.statsFail
	c.d.mu.Unlock()
	if !fail {
		return all
	}
	return func(yield func(client.RuleCounters, error) bool) {
		for rc, err := range all {
			if !yield(rc, err) || err != nil {
				return
			}
			yield(client.RuleCounters{}, errBroken)
			return
		}
	}
}

// eachRule yields item(rule) of each rule of a service, by rising id, as the
// client's paged lists do.
func eachRule[T any](c *fakeConn, id uint32, item func(*fakeService, uint32) T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var none T
		d, err := c.lock()
		if err != nil {
			yield(none, err)
			return
		}
		s, err := c.service(id)
		var items []T
		if err == nil {
			for _, rid := range slices.Sorted(maps.Keys(s.rules)) {
				items = append(items, item(s, rid))
			}
		}
		d.mu.Unlock()
		if err != nil {
			yield(none, err)
			return
		}
		for _, x := range items {
			if !yield(x, nil) {
				return
			}
		}
	}
}

func (c *fakeConn) AddRules(id uint32, rs []rule.Rule) ([]uint32, error) {
	ids, err := c.addRules(id, rs)
	c.d.mu.Lock()
	after := c.d.afterAdd
	c.d.mu.Unlock()
	if after != nil {
		after()
	}
	return ids, err
}

func (c *fakeConn) addRules(id uint32, rs []rule.Rule) ([]uint32, error) {
	d, err := c.lock()
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	s, err := c.service(id)
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		if err := r.Validate(rule.DefaultUDPLimits); err != nil {
			return nil, refuse(syscall.EINVAL, uint32(i), "%v", err)
		}
		if d.quota > 0 && len(s.rules)+i >= d.quota {
			return nil, refuse(syscall.EDQUOT, uint32(i), "quota of %d rules exceeded", d.quota)
		}
		for _, old := range s.rules {
			if string(old.Condition.Pattern) == string(r.Condition.Pattern) {
				return nil, refuse(syscall.EEXIST, uint32(i), "same condition")
			}
		}
	}
	var ids []uint32
	for _, r := range rs {
		s.nextRule++
		s.rules[s.nextRule] = r
		ids = append(ids, s.nextRule)
	}
	d.logf("add %d: %d", id, len(rs))
	return ids, nil
}

func (c *fakeConn) DeleteRules(id uint32, ids []uint32) error {
	d, err := c.lock()
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	s, err := c.service(id)
	if err != nil {
		return err
	}
	for i, rid := range ids {
		if _, ok := s.rules[rid]; !ok {
			d.logf("delete %d: refused, no rule %d", id, rid)
			return refuse(syscall.ENOENT, uint32(i), "no rule %d", rid)
		}
	}
	for _, rid := range ids {
		delete(s.rules, rid)
		delete(s.hits, rid)
	}
	d.logf("delete %d: %d", id, len(ids))
	return nil
}

func (c *fakeConn) Begin(id uint32) (Txn, error) {
	d, err := c.lock()
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if _, err := c.service(id); err != nil {
		return nil, err
	}
	return &fakeTxn{c: c, service: id}, nil
}

func (c *fakeConn) Close() error {
	c.broken = true
	return nil
}

// fakeTxn holds its batches until Commit applies them all or none.
type fakeTxn struct {
	c       *fakeConn
	service uint32
	replace []client.RuleEntry
	del     []uint32
}

func (t *fakeTxn) ReplaceRules(u []client.RuleEntry) error {
	t.replace = append(t.replace, u...)
	return nil
}

func (t *fakeTxn) DeleteRules(ids []uint32) error {
	t.del = append(t.del, ids...)
	return nil
}

func (t *fakeTxn) Abort() error { return nil }

func (t *fakeTxn) Commit() (int, error) {
	d, err := t.c.lock()
	if err != nil {
		return 0, err
	}
	defer d.mu.Unlock()
	s, err := t.c.service(t.service)
	if err != nil {
		return 0, err
	}
	for _, e := range t.replace {
		if _, ok := s.rules[e.RuleID]; !ok {
			return 0, refuse(syscall.ENOENT, client.NoIndex, "no rule %d", e.RuleID)
		}
	}
	for _, e := range t.replace {
		s.rules[e.RuleID] = e.Rule
	}
	for _, rid := range t.del {
		if _, ok := s.rules[rid]; !ok {
			d.logf("txn %d: refused, no rule %d", t.service, rid)
			return 0, refuse(syscall.ENOENT, client.NoIndex, "no rule %d", rid)
		}
	}
	for _, rid := range t.del {
		delete(s.rules, rid)
		delete(s.hits, rid)
	}
	d.logf("txn %d: replace %d delete %d", t.service, len(t.replace), len(t.del))
	return 0, nil
}
