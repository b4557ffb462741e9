package daemon

import (
	"slices"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/maputil"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// service is an attached socket as santad knows it.
type service struct {
	journal.Service                // id, socket, owner, rules
	use             usage          // what its rules count against the owner's quota
	size            int64          // its bytes in a journal snapshot
	sorted          []model.RuleID // the ids of Rules in rising order; nil when stale
	offsets         map[uint16]int // its rules by condition offset (checkOffsets)
	// manager is the HELLO name of the client that attached it or last
	// set its learning. Not journaled: after a restart, the manager's
	// next LEARN names it again.
	manager string
	// parser is PARSER's, and guards are the guards of its guarded rules
	// (of Rules too). Neither is journaled, nor are its guarded rules: a
	// guard holds the data plane's generations, which a restart does not
	// keep (guards.go).
	parser model.Parser
	guards map[model.RuleID]*model.Guard
	// admin: an admin attached it (restored: its uid is 0, or its gid
	// admin_group's), which lifts its uid's connection quota (connOwner).
	admin bool
}

// state is every service with its owner and rules: what the journal holds
// and the data plane runs. The Server's mutex guards it.
type state struct {
	services map[model.ServiceID]*service
	usage    map[uint32]usage // by owner uid
	owned    map[uint32]int   // services by owner uid
	live     int64            // bytes of a journal snapshot of it all
}

func newState() state {
	return state{services: map[model.ServiceID]*service{}, usage: map[uint32]usage{}, owned: map[uint32]int{}}
}

// add makes s a service, with whatever rules it has.
func (st *state) add(js *journal.Service) *service {
	s := &service{Service: *js, size: journal.ServiceSize, offsets: map[uint16]int{}}
	for _, r := range s.Rules {
		s.use = s.use.plus(ruleUse(r))
		s.size += journal.RuleSize(r)
		s.offsets[r.Condition.Offset]++
	}
	st.services[s.ID] = s
	st.owned[s.UID]++
	st.charge(s, s.use, s.size)
	return s
}

// remove forgets a service and its rules.
func (st *state) remove(s *service) {
	delete(st.services, s.ID)
	if st.owned[s.UID]--; st.owned[s.UID] == 0 {
		delete(st.owned, s.UID)
	}
	st.charge(s, usage{-s.use.rules, -s.use.bytes}, -s.size)
}

// applied records a batch the data plane took; b.AddIDs are its new ids,
// b.AddGuards and b.ReplaceGuards its guards.
func (st *state) applied(s *service, b model.Batch) {
	var use usage
	var size int64
	drop := func(id model.RuleID) {
		old := s.Rules[id]
		use = use.minus(ruleUse(old))
		size -= s.journalSize(id, old)
		if s.offsets[old.Condition.Offset]--; s.offsets[old.Condition.Offset] == 0 {
			delete(s.offsets, old.Condition.Offset)
		}
		delete(s.guards, id)
	}
	put := func(id model.RuleID, r rule.Rule, g *model.Guard) {
		s.Rules[id] = r
		if g != nil {
			s.guards = maputil.Reserve(s.guards, 1)
			s.guards[id] = g
		}
		s.offsets[r.Condition.Offset]++
		use = use.plus(ruleUse(r))
		size += s.journalSize(id, r)
	}
	for _, id := range b.Delete {
		drop(id)
		delete(s.Rules, id)
	}
	for i, u := range b.Replace {
		drop(u.ID)
		put(u.ID, u.Rule, guardAt(b.ReplaceGuards, i))
	}
	s.Rules = maputil.Reserve(s.Rules, len(b.Add))
	for i, r := range b.Add {
		put(b.AddIDs[i], r, guardAt(b.AddGuards, i))
	}
	if len(b.Add)+len(b.Delete) > 0 {
		s.sorted = nil
	}
	s.use = s.use.plus(use)
	s.size += size
	st.charge(s, use, size)
}

// journalSize is what rule id takes in a journal snapshot: nothing if it
// is guarded.
func (s *service) journalSize(id model.RuleID, r rule.Rule) int64 {
	if s.guards[id] != nil {
		return 0
	}
	return journal.RuleSize(r)
}

func (st *state) charge(s *service, use usage, size int64) {
	st.usage[s.UID] = st.usage[s.UID].plus(use)
	if st.usage[s.UID] == (usage{}) {
		delete(st.usage, s.UID)
	}
	st.live += size
}

// ids are a service's rule ids in rising order, sorted once per change of
// the set: listing a large service page by page must not sort every page.
func (s *service) ids() []model.RuleID {
	if s.sorted == nil {
		s.sorted = make([]model.RuleID, 0, len(s.Rules))
		for id := range s.Rules {
			s.sorted = append(s.sorted, id)
		}
		slices.Sort(s.sorted)
	}
	return s.sorted
}

// byID lists the services by id.
func (st *state) byID(yield func(*service) bool) {
	ids := make([]model.ServiceID, 0, len(st.services))
	for id := range st.services {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !yield(st.services[id]) {
			return
		}
	}
}

// journaled lists the services for a journal snapshot, by id, each with
// its unguarded rules only.
func (st *state) journaled(yield func(*journal.Service) bool) {
	for sv := range st.byID {
		if !yield(sv.unguarded()) {
			return
		}
	}
}
