package santadconn

import (
	"errors"
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
	// Rule 1 moved on by 5, rule 2's counter restarted (the id of a
	// deleted rule given to a new one), rule 3 is new, rule 4 is nobody's.
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
	// A read that fails is the caller's error, after the rules before it.
	broken := errors.New("connection lost")
	failing := func(yield func(client.RuleCounters, error) bool) {
		if yield(client.RuleCounters{RuleID: 1, Hits: 20}, nil) {
			yield(client.RuleCounters{}, broken)
		}
	}
	if err := HitDeltas(failing, last, func(uint32, uint64) bool { return true }); !errors.Is(err, broken) || last[1] != 20 {
		t.Errorf("a failing read: %v, rule 1 noted at %d; want %v and 20", err, last[1], broken)
	}
}
