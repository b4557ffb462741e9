package daemon

import (
	"maps"
	"syscall"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// checkOffsets refuses, with its index, the first of items (the rules b
// adds or puts in place, in request order) that would give service sv more
// distinct condition offsets than the data plane hashes (docs/rules.md,
// "regions"): the data plane refuses such a batch too, but its error names
// no rule. staged is what a transaction holds besides b. Called with s.mu
// held.
func checkOffsets(sv *service, staged, b model.Batch, items []rule.Rule) *protocol.Error {
	if len(items) == 0 {
		return nil
	}
	count := maps.Clone(sv.offsets)
	for _, batch := range []model.Batch{staged, b} {
		for _, id := range batch.Delete {
			forget(count, sv, id)
		}
		for _, u := range batch.Replace {
			forget(count, sv, u.ID)
		}
	}
	for _, r := range staged.Add {
		count[r.Condition.Offset]++
	}
	for _, u := range staged.Replace {
		count[u.Rule.Condition.Offset]++
	}
	limit := rule.LimitsFor(sv.Info.Protocol).MaxRegions
	distinct := len(count)
	for i, r := range items {
		off := r.Condition.Offset
		if count[off] == 0 {
			if distinct++; distinct > limit {
				return protocol.ErrorAt(syscall.EINVAL, uint32(i), "rule %d of the batch: condition offset %d would make %d distinct condition offsets in service %d; the limit is %d",
					i, off, distinct, sv.ID, limit)
			}
		}
		count[off]++
	}
	return nil
}

// forget takes the offset of rule id of sv out of count, if the rule is
// still there (a transaction's may have gone since it was staged: COMMIT
// refuses that).
func forget(count map[uint16]int, sv *service, id model.RuleID) {
	r, ok := sv.Rules[id]
	if !ok {
		return
	}
	if count[r.Condition.Offset]--; count[r.Condition.Offset] == 0 {
		delete(count, r.Condition.Offset)
	}
}
