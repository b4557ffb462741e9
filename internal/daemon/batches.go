package daemon

import (
	"errors"
	"syscall"
	"time"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// ADD_RULES, REPLACE_RULES and DELETE_RULES: one batch, applied at once
// (txn 0) or added to a transaction. Either way it is checked at once, so
// that a bad item is refused with its index.

func (s *Server) addRules(sess *session, req *protocol.AddRules) protocol.Body {
	g := requestGuards{add: req.Guards}
	return s.batch(sess, req.ServiceID, req.Txn, model.Batch{Add: req.Rules}, g, req.Rules, func(ids []uint32) protocol.Body {
		return &protocol.AddRulesReply{RuleIDs: ids}
	})
}

func (s *Server) replaceRules(sess *session, req *protocol.ReplaceRules) protocol.Body {
	b := model.Batch{Replace: make([]model.RuleUpdate, len(req.Updates))}
	items := make([]rule.Rule, len(req.Updates))
	var g requestGuards
	for i, u := range req.Updates {
		b.Replace[i] = model.RuleUpdate{ID: model.RuleID(u.RuleID), Rule: u.Rule}
		items[i] = u.Rule
		if u.Guard != nil && g.replace == nil {
			g.replace = make([]*protocol.Guard, len(req.Updates))
		}
		if g.replace != nil {
			g.replace[i] = u.Guard
		}
	}
	return s.batch(sess, req.ServiceID, req.Txn, b, g, items, func([]uint32) protocol.Body {
		return &protocol.ReplaceRulesReply{}
	})
}

func (s *Server) deleteRules(sess *session, req *protocol.DeleteRules) protocol.Body {
	b := model.Batch{Delete: make([]model.RuleID, len(req.RuleIDs))}
	for i, id := range req.RuleIDs {
		b.Delete[i] = model.RuleID(id)
	}
	return s.batch(sess, req.ServiceID, req.Txn, b, requestGuards{}, nil, func([]uint32) protocol.Body {
		return &protocol.DeleteRulesReply{}
	})
}

// compileRules compiles b's rules once, for the data plane, and refuses
// with its index the first rule the data plane would refuse on its own
// for service sv: the data plane's error would not name the request's
// item. The limits are the service's protocol's (a UDP reply must fit one
// datagram), not only those every rule must meet.
func compileRules(sv *service, b *model.Batch) *protocol.Error {
	err := b.Compile(rule.LimitsFor(sv.Info.Protocol))
	if be := (*rule.BatchError)(nil); errors.As(err, &be) {
		return protocol.ErrorAt(syscall.EINVAL, uint32(be.Index), "%v", be.Err)
	}
	if err != nil {
		return protocol.Errorf(syscall.EINVAL, "%v", err)
	}
	return nil
}

// batch applies b, with guards g, to a service now, or stages it in
// transaction txn. items are the rules the request lists (for error
// indexes); reply makes the answer from the ids of added rules.
func (s *Server) batch(sess *session, svc, txnID uint32, b model.Batch, g requestGuards, items []rule.Rule,
	reply func([]uint32) protocol.Body) protocol.Body {
	if txnID != 0 {
		ids, perr := s.stage(sess, svc, txnID, b, g, items)
		if perr != nil {
			return perr
		}
		return reply(ids)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, perr := s.owned(sess, svc)
	if perr != nil {
		return perr
	}
	if perr := checkBatch(sv, &b, g, nil, model.Batch{}, items); perr != nil {
		return perr
	}
	ids, perr := s.apply(sess, sv, b, g, nil, b.Add, items)
	if perr != nil {
		return perr
	}
	return reply(ids)
}

// checkBatch checks at once what can be of b, with guards g, on service
// sv, a transaction's besides what it touched and staged already (or
// nothing), and compiles its rules. Called with s.mu held.
func checkBatch(sv *service, b *model.Batch, g requestGuards, touched map[model.RuleID]bool, staged model.Batch, items []rule.Rule) *protocol.Error {
	if perr := compileRules(sv, b); perr != nil {
		return perr
	}
	if perr := checkGuards(sv, g.add); perr != nil {
		return perr
	}
	if perr := checkGuards(sv, g.replace); perr != nil {
		return perr
	}
	if perr := checkIDs(sv, *b, touched); perr != nil {
		return perr
	}
	return checkOffsets(sv, staged, *b, items)
}

// checkIDs refuses an id of a replacement or deletion that is not a rule
// of the service, or that the batch (or touched, a transaction) names
// twice. Called with s.mu held.
func checkIDs(sv *service, b model.Batch, touched map[model.RuleID]bool) *protocol.Error {
	seen := map[model.RuleID]bool{}
	check := func(i int, id model.RuleID) *protocol.Error {
		if _, ok := sv.Rules[id]; !ok {
			return protocol.ErrorAt(syscall.ENOENT, uint32(i), "service %d has no rule %d", sv.ID, id)
		}
		if seen[id] || touched[id] {
			return protocol.ErrorAt(syscall.EINVAL, uint32(i), "rule %d is replaced or deleted twice", id)
		}
		seen[id] = true
		return nil
	}
	for i, u := range b.Replace {
		if perr := check(i, u.ID); perr != nil {
			return perr
		}
	}
	for i, id := range b.Delete {
		if perr := check(i, id); perr != nil {
			return perr
		}
	}
	return nil
}

// apply makes one all-or-nothing change, b with guards g: quota, data
// plane, state, journal, in that order, so that what the client hears of
// is saved (but guarded rules: guards.go). The change is transaction t's,
// or nil; the rules the owner's other open transactions hold count against
// its quota. adds are the rules of an ADD_RULES request (for the quota
// error's index), items those of any request (for a duplicate's). Called
// with s.mu held.
func (s *Server) apply(sess *session, sv *service, b model.Batch, g requestGuards, t *txn, adds, items []rule.Rule) ([]uint32, *protocol.Error) {
	if len(b.Add)+len(b.Replace)+len(b.Delete) == 0 {
		return []uint32{}, nil
	}
	if !sess.peer.Admin {
		more := change(sv, b)
		if perr := s.quotas.of(sv.UID).admit(sv.UID, s.st.usage[sv.UID], s.heldBesides(sv.UID, t), more, adds); perr != nil {
			return nil, perr
		}
	}
	if err := journal.Fits(b); err != nil {
		return nil, protocol.Errorf(syscall.ENOSPC, "%v", err)
	}
	b.AddGuards, b.ReplaceGuards = g.at(time.Now())
	ids, err := s.dp.Apply(sv.ID, b)
	if err != nil {
		return nil, batchError(err, sv, items)
	}
	b.AddIDs = ids
	saved := journalBatch(sv, b)
	s.st.applied(sv, b)
	s.logChange(sess, sv, b, t)
	if len(saved.Add)+len(saved.Replace)+len(saved.Delete) == 0 {
		return wireIDs(ids), nil
	}
	if err := s.record(func(j *journal.Journal) error { return j.Apply(sv.ID, saved) }); err != nil {
		return nil, notSaved(err)
	}
	return wireIDs(ids), nil
}

// wireIDs are rule ids as the protocol carries them.
func wireIDs(ids []model.RuleID) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

// change is what b would change in the quota of sv's owner.
func change(sv *service, b model.Batch) usage {
	u := rulesUse(b.Add)
	for _, r := range b.Replace {
		u = u.plus(ruleUse(r.Rule)).minus(ruleUse(sv.Rules[r.ID]))
	}
	for _, id := range b.Delete {
		u = u.minus(ruleUse(sv.Rules[id]))
	}
	return u
}
