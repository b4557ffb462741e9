package cli

import (
	"cmp"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

// ruleCounters reads the counters of every rule of a service.
func ruleCounters(c *client.Client, service uint32) ([]client.RuleCounters, error) {
	var all []client.RuleCounters
	for rc, err := range c.RuleStats(service) {
		if err != nil {
			return nil, err
		}
		all = append(all, rc)
	}
	return all, nil
}

// conditionsOf reads the conditions of the service's rules whose ids are
// in want. Counters carry ids only, and there is no request for one rule,
// so the service's rules are walked.
func conditionsOf(c *client.Client, service uint32, want map[uint32]bool) (map[uint32]rule.Condition, error) {
	found := make(map[uint32]rule.Condition, len(want))
	if len(want) == 0 {
		return found, nil
	}
	for e, err := range c.Rules(service) {
		if err != nil {
			return nil, err
		}
		if want[e.RuleID] {
			found[e.RuleID] = e.Rule.Condition
		}
	}
	return found, nil
}

// ruleCountersView is a rule's counters, and its condition: counters are
// read by rule id, which says little to people.
type ruleCountersView struct {
	ID        uint32         `json:"id"`
	Hits      uint64         `json:"hits"`
	Bytes     uint64         `json:"bytes"`
	Condition *jsonCondition `json:"condition,omitempty"` // none for a rule gone meanwhile

	cond *rule.Condition
}

func newRuleCountersView(rc client.RuleCounters) ruleCountersView {
	return ruleCountersView{ID: rc.RuleID, Hits: rc.Hits, Bytes: rc.Bytes}
}

func (v *ruleCountersView) setCondition(c rule.Condition) {
	jc := newJSONCondition(c)
	v.Condition, v.cond = &jc, &c
}

// byHits orders rules by hits, most first, then by id.
func byHits(a, b ruleCountersView) int {
	return cmp.Or(cmp.Compare(b.Hits, a.Hits), cmp.Compare(a.ID, b.ID))
}

// conditionCells are the table cells of the rule's condition: offset,
// pattern (as p shows it), length.
func (v ruleCountersView) conditionCells(p proto) (any, string, string) {
	if v.cond == nil {
		return "-", "(deleted)", "-"
	}
	return v.cond.Offset, p.patternCell(*v.cond, patternWidth), lengthCell(*v.cond)
}
