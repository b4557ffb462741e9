package santadconn

import (
	"iter"

	"github.com/santa-offload/santa/client"
)

// HitDeltas reads a service's rule counters (Santad.RuleStats) and calls
// add with each rule's hits since the read before, noted in last by rule
// id: a counter below its note restarted, and all its hits are new. A rule
// add does not follow (it returns false) is not noted.
func HitDeltas(counters iter.Seq2[client.RuleCounters, error], last map[uint32]uint64, add func(rule uint32, hits uint64) bool) error {
	for c, err := range counters {
		if err != nil {
			return err
		}
		hits := c.Hits - last[c.RuleID]
		if c.Hits < last[c.RuleID] {
			hits = c.Hits // the counter restarted
		}
		if add(c.RuleID, hits) {
			last[c.RuleID] = c.Hits
		}
	}
	return nil
}
