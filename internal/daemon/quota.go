package daemon

import (
	"fmt"
	"syscall"

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
// its pattern and reply bytes.
func ruleUse(r rule.Rule) usage {
	return usage{1, int64(len(r.Condition.Pattern)) + int64(r.ReplyLen)}
}

func rulesUse(rs []rule.Rule) usage {
	var u usage
	for _, r := range rs {
		u = u.plus(ruleUse(r))
	}
	return u
}

// admit refuses more on top of what the uid has installed and what its
// open transactions hold (the rules they stage to add: their ids are
// reserved, and they land at COMMIT) if that breaks q, with a message
// naming the quota. adds are the rules of an ADD_RULES request, if that is
// what more is: the error's index is then the first rule beyond the quota.
// A change that does not grow a count is admitted even above its quota,
// which a reload or restart may have lowered below what the uid holds: it
// must still be able to delete down to it.
func (q Quota) admit(uid uint32, installed, held, more usage, adds []rule.Rule) *protocol.Error {
	after := installed.plus(held).plus(more)
	overRules := q.Rules > 0 && more.rules > 0 && after.rules > int64(q.Rules)
	overBytes := q.Bytes > 0 && more.bytes > 0 && after.bytes > int64(q.Bytes)
	if !overRules && !overBytes {
		return nil
	}
	index := uint32(protocol.NoIndex)
	sum := after.minus(rulesUse(adds)) // all but adds
	for i, r := range adds {
		sum = sum.plus(ruleUse(r))
		if (overRules && sum.rules > int64(q.Rules)) || (overBytes && sum.bytes > int64(q.Bytes)) {
			index = uint32(i)
			break
		}
	}
	if overRules {
		return exceeded(index, uid, uint64(q.Rules), "rules", installed.rules, held.rules, more.rules)
	}
	return exceeded(index, uid, q.Bytes, "bytes", installed.bytes, held.bytes, more.bytes)
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

// admitService refuses uid, which has attached have services, one more if
// that breaks q.
func (q Quota) admitService(uid uint32, have int) *protocol.Error {
	if n := int(*q.Services); n > 0 && have >= n {
		return protocol.Errorf(syscall.EDQUOT, "quota of %d services for uid %d exceeded: %d attached", n, uid, have)
	}
	return nil
}
