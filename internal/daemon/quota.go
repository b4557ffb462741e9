package daemon

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// Quotas count, per uid, the services that uid attached, their rules and
// the rules' bytes. They bind clients that are not admins.

// quotaPolicy is every uid's quota.
type quotaPolicy struct {
	def   Quota
	byUID map[uint32]Quota
}

func (p quotaPolicy) of(uid uint32) Quota {
	if q, ok := p.byUID[uid]; ok {
		return q
	}
	return p.def
}

// usage is rules and their bytes, or a change of them.
type usage struct {
	rules int64
	bytes int64
}

func (u usage) plus(v usage) usage  { return usage{u.rules + v.rules, u.bytes + v.bytes} }
func (u usage) minus(v usage) usage { return usage{u.rules - v.rules, u.bytes - v.bytes} }

// ruleUse is what a rule counts against its owner's quota: one rule, and
// its pattern's bytes and its reply's or, if more, those its put
// processors carry. santad (and its journal) keeps a rule as it was sent,
// puts and all, and the data plane the reply they make: a rule's puts may
// overwrite one another, up to MaxProcessors times the reply length, and
// counting the reply alone would let a uid make santad hold that many
// times its byte quota. Puts that do not overlap fit in the reply, so
// almost every rule counts its reply, as it always did.
func ruleUse(r rule.Rule) usage {
	var puts int64
	for _, p := range r.Processors {
		if p.Kind == rule.ProcessorPut {
			puts += int64(len(p.Bytes))
		}
	}
	return usage{1, int64(len(r.Condition.Pattern)) + max(int64(r.ReplyLen), puts)}
}

func rulesUse(rs []rule.Rule) usage {
	var u usage
	for _, r := range rs {
		u = u.plus(ruleUse(r))
	}
	return u
}

// stagedUse is what a transaction holds of its owner's quota for staging
// b: its added rules and the rules it replaces others with, in full. What
// the rules it replaces or deletes would free counts only at COMMIT.
func stagedUse(b model.Batch) usage {
	u := rulesUse(b.Add)
	for _, r := range b.Replace {
		u = u.plus(ruleUse(r.Rule))
	}
	return u
}

// admit refuses more on top of what the uid has installed and what its
// open transactions hold (the rules they stage, to add or to replace
// others with: Server.held) if that breaks q, with a message naming the
// quota. adds are the rules of an ADD_RULES request, if that is what more
// is: the error's index is then the first rule beyond the quota. A change
// that does not grow a count is admitted even above its quota, which a
// reload or restart may have lowered below what the uid holds: it must
// still be able to delete down to it.
func (q Quota) admit(uid uint32, installed, held, more usage, adds []rule.Rule) *protocol.Error {
	after := installed.plus(held).plus(more)
	overRules := q.Rules > 0 && more.rules > 0 && after.rules > int64(q.Rules)
	overBytes := q.Bytes > 0 && more.bytes > 0 && after.bytes > int64(q.Bytes)
	if !overRules && !overBytes {
		return nil
	}
	index := q.beyond(overRules, overBytes, after.minus(rulesUse(adds)), adds)
	if overRules {
		return exceeded(index, uid, uint64(q.Rules), "rules", installed.rules, held.rules, more.rules)
	}
	return exceeded(index, uid, q.Bytes, "bytes", installed.bytes, held.bytes, more.bytes)
}

// admitStaged refuses a transaction's staging of more, the rules of a
// request (items) to add or to replace others with, if with what the
// uid's open transactions hold already (held) that breaks q by itself.
// admit lets a transaction count on what the rules it replaces or deletes
// will free at COMMIT, but every open transaction of the uid could count
// on the same rules: what they stage, which santad holds until they end,
// must fit the quota whatever they would install. The error's index is
// the first of items beyond the quota. Staging nothing (DELETE_RULES) is
// admitted even above the quota.
func (q Quota) admitStaged(uid uint32, held, more usage, items []rule.Rule) *protocol.Error {
	after := held.plus(more)
	overRules := q.Rules > 0 && more.rules > 0 && after.rules > int64(q.Rules)
	overBytes := q.Bytes > 0 && more.bytes > 0 && after.bytes > int64(q.Bytes)
	if !overRules && !overBytes {
		return nil
	}
	index := q.beyond(overRules, overBytes, held, items)
	if overRules {
		return stagedExceeded(index, uid, uint64(q.Rules), "rules", held.rules, more.rules)
	}
	return stagedExceeded(index, uid, q.Bytes, "bytes", held.bytes, more.bytes)
}

// beyond is the index of the first of rs that takes base past the quota
// that is over (rules, bytes), or NoIndex.
func (q Quota) beyond(overRules, overBytes bool, base usage, rs []rule.Rule) uint32 {
	sum := base
	for i, r := range rs {
		sum = sum.plus(ruleUse(r))
		if (overRules && sum.rules > int64(q.Rules)) || (overBytes && sum.bytes > int64(q.Bytes)) {
			return uint32(i)
		}
	}
	return protocol.NoIndex
}

// exceeded is the EDQUOT of a rule or byte quota of limit units.
func exceeded(index, uid uint32, limit uint64, units string, installed, held, more int64) *protocol.Error {
	holding := ""
	if held > 0 {
		holding = fmt.Sprintf(", %d held by open transactions", held)
	}
	return protocol.ErrorAt(syscall.EDQUOT, index, "quota of %d %s for uid %d exceeded: %d installed%s, %d more requested",
		limit, units, uid, installed, holding, more)
}

// stagedExceeded is the EDQUOT of rules staged beyond a rule or byte quota
// of limit units.
func stagedExceeded(index, uid uint32, limit uint64, units string, held, more int64) *protocol.Error {
	return protocol.ErrorAt(syscall.EDQUOT, index, "quota of %d %s for uid %d exceeded by open transactions: %d held, %d more staged",
		limit, units, uid, held, more)
}

// admitService refuses uid, which has attached have services, one more if
// that breaks q.
func (q Quota) admitService(uid uint32, have int) *protocol.Error {
	if n := int(*q.Services); n > 0 && have >= n {
		return protocol.Errorf(syscall.EDQUOT, "quota of %d services for uid %d exceeded: %d attached", n, uid, have)
	}
	return nil
}

// connOwner is the owner a TCP listener of uid's registers with (nil for
// any other socket): its uid, and the uid's connection quota, none if an
// admin attaches it or attached another of the uid's services: the data
// plane keeps one limit per uid. Called with s.mu held.
func (s *Server) connOwner(info model.SocketInfo, uid uint32, admin bool) *model.ConnOwner {
	if info.Protocol != unix.IPPROTO_TCP {
		return nil
	}
	return &model.ConnOwner{UID: uid, Limit: s.connLimit(uid, admin)}
}

// connLimit is uid's connection quota for its TCP listeners, 0 (none) if
// admin or if an admin attached one of its services. Called with s.mu
// held.
func (s *Server) connLimit(uid uint32, admin bool) uint32 {
	if admin {
		return 0
	}
	for _, sv := range s.st.services {
		if sv.UID == uid && sv.admin {
			return 0
		}
	}
	return *s.quotas.of(uid).TCPConnections
}

// applyConnLimits gives every uid with a TCP listener its connection
// quota, after a reload. Called with s.mu held.
func (s *Server) applyConnLimits() {
	done := map[uint32]bool{}
	for _, sv := range s.st.services {
		if sv.Info.Protocol != unix.IPPROTO_TCP || done[sv.UID] {
			continue
		}
		done[sv.UID] = true
		s.dp.SetConnectionLimit(sv.UID, s.connLimit(sv.UID, false))
	}
}
