package daemon

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

// fakeDP is a data plane in memory: services by socket cookie, rules with
// ids handed out in order, duplicate conditions refused as the real one
// refuses them. It restores too (Restorer), from what restorable says is
// still open.
type fakeDP struct {
	mu         sync.Mutex
	services   map[model.ServiceID]*fakeService
	nextSvc    model.ServiceID
	nextRule   model.RuleID
	restorable map[uint64]bool   // cookies of open sockets, for RestoreService
	released   []model.RuleID    // what ReleaseRuleIDs was given
	connLimits map[uint32]uint32 // what SetConnectionLimit set last, by uid
}

type fakeService struct {
	cookie   uint64
	rules    map[model.RuleID]rule.Rule
	learning model.Learning
	hot      model.HotSet // what Hot gives while it learns
	parser   model.Parser
	guards   map[model.RuleID]*model.Guard // of its guarded rules
	epoch    uint32                        // of the domain it starts: a new one each start
	owner    *model.ConnOwner              // AddService's, RestoreService's
}

func newFakeDP() *fakeDP {
	return &fakeDP{services: map[model.ServiceID]*fakeService{}, restorable: map[uint64]bool{}, connLimits: map[uint32]uint32{}}
}

// AdoptConnection: the fake adopts no connection.
func (f *fakeDP) AdoptConnection(model.ServiceID, int) error { return model.ErrNotListener }

func (f *fakeDP) AddService(_ int, info model.SocketInfo, owner *model.ConnOwner) (model.ServiceID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, s := range f.services {
		if s.cookie == info.Cookie {
			return 0, fmt.Errorf("socket is already registered as service %d: %w", id, model.ErrExists)
		}
	}
	id := f.nextSvc
	f.nextSvc++
	f.services[id] = &fakeService{cookie: info.Cookie, rules: map[model.RuleID]rule.Rule{}, guards: map[model.RuleID]*model.Guard{}, owner: owner}
	f.setLimit(owner)
	return id, nil
}

func (f *fakeDP) RestoreService(id model.ServiceID, info model.SocketInfo, owner *model.ConnOwner) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.restorable[info.Cookie] {
		return model.ErrSocketClosed
	}
	f.services[id] = &fakeService{cookie: info.Cookie, rules: map[model.RuleID]rule.Rule{}, guards: map[model.RuleID]*model.Guard{}, owner: owner}
	f.setLimit(owner)
	return nil
}

// setLimit is what a listener's owner sets. Called with f.mu held.
func (f *fakeDP) setLimit(owner *model.ConnOwner) {
	if owner != nil {
		f.connLimits[owner.UID] = owner.Limit
	}
}

func (f *fakeDP) SetConnectionLimit(uid, limit uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connLimits[uid] = limit
}

// connLimit is the connection limit of uid's listeners, and whether it has one.
func (f *fakeDP) connLimit(uid uint32) (uint32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.connLimits[uid]
	return l, ok
}

func (f *fakeDP) RemoveService(id model.ServiceID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.services[id] == nil {
		return model.ErrUnknownService
	}
	delete(f.services, id)
	return nil
}

func (f *fakeDP) Apply(id model.ServiceID, b model.Batch) ([]model.RuleID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.services[id]
	if s == nil {
		return nil, model.ErrUnknownService
	}
	// As the real one, it compiles nothing: the daemon hands over the
	// compiled rules, each the compiled form of its rule.
	if len(b.AddCompiled) != len(b.Add) || len(b.ReplaceCompiled) != len(b.Replace) {
		return nil, fmt.Errorf("batch not compiled: %d compiled for %d added rules, %d for %d replacements",
			len(b.AddCompiled), len(b.Add), len(b.ReplaceCompiled), len(b.Replace))
	}
	compiled := slices.Concat(b.AddCompiled, b.ReplaceCompiled)
	for i, r := range slices.Concat(b.Add, b.ReplaceRules()) {
		c := compiled[i]
		if want, err := rule.Compile(r); err != nil || !bytes.Equal(c.Template, want.Template) {
			return nil, fmt.Errorf("rule %d of the batch: compiled form %q is not the rule's (%v)", i, c.Template, err)
		}
	}
	for _, g := range slices.Concat(b.AddGuards, b.ReplaceGuards) {
		if err := f.checkGuard(s, g); err != nil {
			return nil, err
		}
	}
	next := map[model.RuleID]rule.Rule{}
	for rid, r := range s.rules {
		next[rid] = r
	}
	for _, rid := range b.Delete {
		if _, ok := next[rid]; !ok {
			return nil, model.ErrUnknownRule
		}
		delete(next, rid)
	}
	for _, u := range b.Replace {
		if _, ok := next[u.ID]; !ok {
			return nil, model.ErrUnknownRule
		}
		next[u.ID] = u.Rule
	}
	ids := b.AddIDs
	if ids == nil {
		for range b.Add {
			ids = append(ids, f.nextRule)
			f.nextRule++
		}
	}
	for i, r := range b.Add {
		for other, o := range next {
			if o.Condition.Overlaps(r.Condition) {
				return nil, &rules.DuplicateError{First: uint32(other), Second: uint32(ids[i]), Cond: o.Condition, SecondCond: r.Condition}
			}
		}
		next[ids[i]] = r
		f.nextRule = max(f.nextRule, ids[i]+1)
	}
	s.rules = next
	for _, rid := range b.Delete {
		delete(s.guards, rid)
	}
	for i, u := range b.Replace {
		s.guard(u.ID, b.ReplaceGuards, i)
	}
	for i, rid := range ids {
		s.guard(rid, b.AddGuards, i)
	}
	return ids, nil
}

// guard records guard i of gs (nil: none) for rule id.
func (s *fakeService) guard(id model.RuleID, gs []*model.Guard, i int) {
	delete(s.guards, id)
	if gs != nil && gs[i] != nil {
		s.guards[id] = gs[i]
	}
}

// ReserveRuleIDs hands out the next ids; the fake never reuses an id, so
// releasing has nothing to give back but is recorded for the tests.
func (f *fakeDP) ReserveRuleIDs(n int) ([]model.RuleID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]model.RuleID, n)
	for i := range ids {
		ids[i] = f.nextRule
		f.nextRule++
	}
	return ids, nil
}

func (f *fakeDP) ReleaseRuleIDs(ids []model.RuleID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, ids...)
}

func (f *fakeDP) ServiceStats(id model.ServiceID) (model.ServiceStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.services[id] == nil {
		return model.ServiceStats{}, model.ErrUnknownService
	}
	return model.ServiceStats{Matched: 3, Passed: 1}, nil
}

func (f *fakeDP) EachRuleStats(ids []model.RuleID, out func(model.RuleID, model.RuleStats)) error {
	for _, id := range ids {
		out(id, model.RuleStats{Hits: uint64(id)})
	}
	return nil
}

func (f *fakeDP) PathStats() (model.PathStats, error) {
	return model.PathStats{"answered": 3, "tcp_fin": 2, "passed": 0}, nil
}

// rulesOf is what the fake data plane runs for a service.
func (f *fakeDP) rulesOf(id model.ServiceID) map[model.RuleID]rule.Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.services[id]; s != nil {
		return s.rules
	}
	return nil
}

func (f *fakeDP) SetLearning(id model.ServiceID, l model.Learning) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.services[id] == nil {
		return model.ErrUnknownService
	}
	f.services[id].learning = l
	return nil
}

func (f *fakeDP) Hot(id model.ServiceID, from, n int) (model.HotSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.services[id]
	switch {
	case s == nil:
		return model.HotSet{}, model.ErrUnknownService
	case !s.learning.Enabled:
		return model.HotSet{}, model.ErrNotLearning
	}
	return s.hot.Page(from, n), nil
}

// learningOf is what the fake data plane learns of a service.
func (f *fakeDP) learningOf(id model.ServiceID) model.Learning {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.services[id].learning
}

// setHot makes Hot give h for a service.
func (f *fakeDP) setHot(id model.ServiceID, h model.HotSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.services[id].hot = h
}

// SetParser marks services as the data plane does: a domain's first
// service starts it, in a new life each time, the others join it.
func (f *fakeDP) SetParser(id model.ServiceID, p model.Parser) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.services[id]
	if s == nil {
		return model.ErrUnknownService
	}
	if p.Kind == model.ParserMemcached && p.Domain != id {
		if d := f.services[p.Domain]; d == nil || d.parser != (model.Parser{Kind: model.ParserMemcached, Domain: p.Domain}) {
			return fmt.Errorf("domain %d not started", p.Domain)
		}
	}
	s.parser = p
	if p.Kind == model.ParserMemcached && p.Domain == id {
		s.epoch++
	}
	return nil
}

// Generation gives the domain's life, generations 7 and 3 of every key.
func (f *fakeDP) Generation(id model.ServiceID, key []byte) (model.Generation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.domainOf(id)
	if err != nil {
		return model.Generation{}, err
	}
	return model.Generation{Gen: 7, DomainGen: 3, Epoch: d.epoch}, nil
}

// MemcachedStats gives counters that tell the domain: writes is its id.
func (f *fakeDP) MemcachedStats(id model.ServiceID) (model.MemcachedStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.domainOf(id); err != nil {
		return model.MemcachedStats{}, err
	}
	return model.MemcachedStats{Writes: uint64(f.services[id].parser.Domain), GuardStale: 2, UDPTimedOut: 3}, nil
}

// domainOf is the service that started the domain of memcached service id.
func (f *fakeDP) domainOf(id model.ServiceID) (*fakeService, error) {
	s := f.services[id]
	switch {
	case s == nil:
		return nil, model.ErrUnknownService
	case s.parser.Kind != model.ParserMemcached:
		return nil, model.ErrNotMemcached
	}
	return f.services[s.parser.Domain], nil
}

// checkGuard refuses what the data plane refuses of a guard of s: any,
// unless s is a memcached service; one of another life of its domain.
func (f *fakeDP) checkGuard(s *fakeService, g *model.Guard) error {
	if g == nil {
		return nil
	}
	if s.parser.Kind != model.ParserMemcached {
		return model.ErrNotMemcached
	}
	if d := f.services[s.parser.Domain]; g.At.Epoch != d.epoch {
		return fmt.Errorf("%w: life %d, not %d", model.ErrStaleGuard, g.At.Epoch, d.epoch)
	}
	return nil
}

// guardsOf are the guards the fake data plane runs for a service's rules.
func (f *fakeDP) guardsOf(id model.ServiceID) map[model.RuleID]*model.Guard {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.services[id].guards)
}

// fakePlane is fakeDP as the whole Plane Run needs: every interface
// attaches with generic XDP, and nothing is pinned or watched.
type fakePlane struct{ *fakeDP }

func (fakePlane) WatchSockets(string, func(model.ServiceID, model.SocketInfo)) error { return nil }
func (fakePlane) Attach(ifname string) (model.Attachment, error) {
	return model.Attachment{Interface: ifname, XDP: model.XDPGeneric, TC: true}, nil
}
func (fakePlane) DetachStale() error                              { return nil }
func (fakePlane) EndRestore() []model.ServiceID                   { return nil }
func (fakePlane) HandOverConnections() (model.HandOver, error)    { return model.HandOver{}, nil }
func (fakePlane) ReleaseLeftConnections() (model.HandOver, error) { return model.HandOver{}, nil }
func (fakePlane) Close() error                                    { return nil }
