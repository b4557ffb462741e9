package daemon

import (
	"maps"
	"math"
	"syscall"
	"time"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// Guarded rules (docs/memcached.md, "Using it from santad"): a rule of a
// memcached service may carry a guard, which the data plane checks before
// the rule answers. A guard holds generations of the data plane, which a
// restart of santad does not keep: guarded rules are never journaled, so
// they are not restored, and a rule whose guard a batch adds or removes
// leaves or enters the journal.

// requestGuards are the guards of a batch's added and replacing rules as
// the requests give them: nil, or one (or nil) for each rule. Their
// deadlines stay relative until the batch is applied.
type requestGuards struct {
	add, replace []*protocol.Guard
}

// appendGuards is the guards of a list of n items followed by those of a
// list of m items, more: nil if neither has any.
func appendGuards(gs []*protocol.Guard, n int, more []*protocol.Guard, m int) []*protocol.Guard {
	if gs == nil && more == nil {
		return nil
	}
	if gs == nil {
		gs = make([]*protocol.Guard, n, n+m)
	}
	if more == nil {
		return append(gs, make([]*protocol.Guard, m)...)
	}
	return append(gs, more...)
}

// checkGuards refuses, with its index in the request, the first guard
// service sv cannot take: any, unless it is a memcached service; one with
// a key memcached would refuse. A guard whose domain has started a new
// life since its generations were read is refused when the batch is
// applied (ESTALE). Called with s.mu held.
func checkGuards(sv *service, guards []*protocol.Guard) *protocol.Error {
	for i, g := range guards {
		if g == nil {
			continue
		}
		if sv.parser.Kind != model.ParserMemcached {
			return protocol.ErrorAt(syscall.EINVAL, uint32(i), "rule %d of the batch has a guard, and service %d is not a memcached service: "+
				"PARSER marks it one", i, sv.ID)
		}
		if g.Key != nil {
			if err := model.CheckMemcachedKey(g.Key); err != nil {
				return protocol.ErrorAt(syscall.EINVAL, uint32(i), "the guard of rule %d of the batch: %v", i, err)
			}
		}
	}
	return nil
}

// at is the guards as the data plane takes them, their deadlines counted
// from now.
func (g requestGuards) at(now time.Time) (add, replace []*model.Guard) {
	return guardsAt(g.add, now), guardsAt(g.replace, now)
}

func guardsAt(gs []*protocol.Guard, now time.Time) []*model.Guard {
	if gs == nil {
		return nil
	}
	out := make([]*model.Guard, len(gs))
	for i, g := range gs {
		if g == nil {
			continue
		}
		out[i] = &model.Guard{Key: g.Key, At: model.Generation{Gen: g.Gen, DomainGen: g.DomainGen, Epoch: g.Epoch}}
		if g.ExpiresInMS != 0 {
			out[i].Expires = now.Add(time.Duration(g.ExpiresInMS) * time.Millisecond)
		}
	}
	return out
}

// listedGuard is g as LIST_RULES shows it at now: its deadline as the time
// left, rounded up to the millisecond, 1 once past (0 is never).
func listedGuard(g *model.Guard, now time.Time) *protocol.Guard {
	if g == nil {
		return nil
	}
	l := &protocol.Guard{Key: g.Key, Gen: g.At.Gen, DomainGen: g.At.DomainGen, Epoch: g.At.Epoch}
	if !g.Expires.IsZero() {
		left := (g.Expires.Sub(now) + time.Millisecond - 1) / time.Millisecond
		l.ExpiresInMS = uint32(min(max(left, 1), math.MaxUint32))
	}
	return l
}

// guardAt is guard i of gs, which may be nil (no guards).
func guardAt(gs []*model.Guard, i int) *model.Guard {
	if gs == nil {
		return nil
	}
	return gs[i]
}

// journalBatch is what the journal keeps of b, a batch on sv applied but
// not yet recorded in the state (b.AddIDs are set): its unguarded rules. A
// rule that gains a guard leaves the journal, one that loses it enters.
func journalBatch(sv *service, b model.Batch) model.Batch {
	if b.AddGuards == nil && b.ReplaceGuards == nil && len(sv.guards) == 0 {
		return b
	}
	var j model.Batch
	for i, r := range b.Add {
		if guardAt(b.AddGuards, i) == nil {
			j.Add, j.AddIDs = append(j.Add, r), append(j.AddIDs, b.AddIDs[i])
		}
	}
	for i, u := range b.Replace {
		was, is := sv.guards[u.ID] != nil, guardAt(b.ReplaceGuards, i) != nil
		switch {
		case is && !was:
			j.Delete = append(j.Delete, u.ID)
		case was && !is:
			j.Add, j.AddIDs = append(j.Add, u.Rule), append(j.AddIDs, u.ID)
		case !is:
			j.Replace = append(j.Replace, u)
		}
	}
	for _, id := range b.Delete {
		if sv.guards[id] == nil {
			j.Delete = append(j.Delete, id)
		}
	}
	return j
}

// unguarded is the service as a journal snapshot holds it: without its
// guarded rules.
func (s *service) unguarded() *journal.Service {
	if len(s.guards) == 0 {
		return &s.Service
	}
	js := s.Service
	js.Rules = maps.Clone(s.Rules)
	for id := range s.guards {
		delete(js.Rules, id)
	}
	return &js
}
