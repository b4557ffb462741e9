package daemon

import (
	"maps"
	"slices"
	"syscall"
	"time"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// Room in one reply for the items of a LIST_RULES or RULE_STATS page.
const pageRoom = protocol.MaxMessage - protocol.PageOverhead

// listRules answers one page of a service's rules in rising id order: as
// many as fit one reply, or max if fewer.
//
// Version 1 cannot carry a length condition or a guard, and leaving either
// out would list a rule that answers fewer requests than it says: a page
// of version 1 ends before a rule with one, and a page that would start
// with it is refused (EPROTONOSUPPORT), so that the client learns what it
// cannot see.
func (s *Server) listRules(sess *session, req *protocol.ListRules) protocol.Body {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, perr := s.owned(sess, req.ServiceID)
	if perr != nil {
		return perr
	}
	r := &protocol.ListRulesReply{}
	ids, room, now := page(sv, req.Start), pageRoom, time.Now()
	for _, id := range ids {
		e := protocol.RuleEntry{RuleID: uint32(id), Rule: sv.Rules[id], Guard: listedGuard(sv.guards[id], now)}
		if what := version2Only(e); sess.version < protocol.Version2 && what != "" {
			if len(r.Rules) == 0 {
				return protocol.Errorf(syscall.EPROTONOSUPPORT, "rule %d of service %d has %s, "+
					"which protocol version %d cannot carry: list it over version %d", id, sv.ID, what, sess.version, protocol.Version2)
			}
			r.Next = uint32(id)
			return r
		}
		if n := protocol.RuleEntrySize(sess.version, &e); n <= room && (req.Max == 0 || len(r.Rules) < int(req.Max)) {
			room -= n
			r.Rules = append(r.Rules, e)
			continue
		}
		r.Next = uint32(id)
		return r
	}
	r.Next = protocol.LastPage
	return r
}

// version2Only names what of e version 1 cannot carry, if anything.
func version2Only(e protocol.RuleEntry) string {
	switch {
	case e.Rule.Condition.HasLength():
		return "a length condition (request length " + e.Rule.Condition.LengthText() + ")"
	case e.Guard != nil:
		return "a guard"
	}
	return ""
}

// ruleStats answers one page of a service's rule counters.
func (s *Server) ruleStats(sess *session, req *protocol.RuleStats) protocol.Body {
	limit := pageRoom / protocol.RuleCountersSize
	if req.Max != 0 && int(req.Max) < limit {
		limit = int(req.Max)
	}
	s.mu.Lock()
	sv, perr := s.owned(sess, req.ServiceID)
	var ids []model.RuleID
	if perr == nil {
		ids = page(sv, req.Start)
		ids = slices.Clone(ids[:min(len(ids), limit+1)])
	}
	s.mu.Unlock()
	if perr != nil {
		return perr
	}
	r := &protocol.RuleStatsReply{Next: protocol.LastPage}
	if len(ids) > limit {
		r.Next, ids = uint32(ids[limit]), ids[:limit]
	}
	r.Counters = make([]protocol.RuleCounters, 0, len(ids))
	err := s.dp.EachRuleStats(ids, func(id model.RuleID, st model.RuleStats) { // rules deleted since are left out
		r.Counters = append(r.Counters, protocol.RuleCounters{RuleID: uint32(id), Hits: st.Hits, Bytes: st.Bytes})
	})
	if err != nil {
		return dataplaneError(err)
	}
	return r
}

// page is a service's rule ids from start on. Called with s.mu held.
func page(sv *service, start uint32) []model.RuleID {
	ids := sv.ids()
	i, _ := slices.BinarySearch(ids, model.RuleID(start))
	return ids[i:]
}

func (s *Server) serviceStats(sess *session, req *protocol.ServiceStats) protocol.Body {
	s.mu.Lock()
	sv, perr := s.owned(sess, req.ServiceID)
	var use usage
	if perr == nil {
		use = sv.use
	}
	s.mu.Unlock()
	if perr != nil {
		return perr
	}
	st, err := s.dp.ServiceStats(sv.ID)
	if err != nil {
		return dataplaneError(err)
	}
	return &protocol.ServiceStatsReply{Matched: st.Matched, Passed: st.Passed, Fallback: st.Fallback(), BadCsum: st.BadCsum,
		Rules: uint32(use.rules), RuleBytes: uint64(use.bytes),
		TCChecksum: st.TCChecksum, TCTooLong: st.TCTooLong, TCNoXDP: st.TCNoXDP}
}

func (s *Server) status() protocol.Body {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &protocol.StatusReply{Daemon: s.version, Capacity: s.capacity, Services: uint32(len(s.st.services)),
		Interfaces: s.ifaces}
	for _, sv := range s.st.services {
		r.Rules += uint32(len(sv.Rules))
	}
	return r
}

// pathStats reads the host's path counters, by name.
func (s *Server) pathStats() protocol.Body {
	paths, err := s.dp.PathStats()
	if err != nil {
		return protocol.Errorf(syscall.EIO, "reading the path counters: %v", err)
	}
	r := &protocol.PathStatsReply{Paths: make([]protocol.PathCount, 0, len(paths))}
	for _, name := range slices.Sorted(maps.Keys(paths)) {
		r.Paths = append(r.Paths, protocol.PathCount{Name: name, Count: paths[name]})
	}
	return r
}
