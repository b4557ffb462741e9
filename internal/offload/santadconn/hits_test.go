package santadconn

import (
	"maps"
	"testing"

	"github.com/santa-offload/santa/client"
)

func TestHitDeltas(t *testing.T) {
	counters := func(cs ...client.RuleCounters) func(func(client.RuleCounters, error) bool) {
		return func(yield func(client.RuleCounters, error) bool) {
			for _, c := range cs {
				if !yield(c, nil) {
					return
				}
			}
		}
	}
	// Rule 1 moved on by 5, rule 2's counter restarted (a rule replaced
	// under the same id), rule 3 is new, rule 4 is nobody's.
	last := map[uint32]uint64{1: 10, 2: 50}
	got := map[uint32]uint64{}
	err := HitDeltas(counters(client.RuleCounters{RuleID: 1, Hits: 15}, client.RuleCounters{RuleID: 2, Hits: 7},
		client.RuleCounters{RuleID: 3, Hits: 4}, client.RuleCounters{RuleID: 4, Hits: 9}), last,
		func(rule uint32, hits uint64) bool {
			got[rule] = hits
			return rule != 4
		})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[uint32]uint64{1: 5, 2: 7, 3: 4, 4: 9}; !maps.Equal(got, want) {
		t.Errorf("deltas %v; want %v", got, want)
	}
	if want := map[uint32]uint64{1: 15, 2: 7, 3: 4}; !maps.Equal(last, want) {
		t.Errorf("noted %v; want %v (rule 4 not followed)", last, want)
	}
}
