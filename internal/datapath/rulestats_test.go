package datapath

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// TestEachRuleStats: the batch reads of the rules' counters give what one
// lookup per rule gives, for dense and sparse ids, runs longer than a
// batch, and rules deleted before the read (left out).
func TestEachRuleStats(t *testing.T) {
	d := openTestWith(t, Options{MaxRules: 1 << 16, MaxServices: 4})
	svc := register(t, d, boundUDP(t, "127.0.0.1:0"))
	rules := make([]rule.Rule, 40000)
	for i := range rules {
		rules[i] = mcGetRule(fmt.Sprintf("k%d", i), "v")
	}
	ids, err := d.AddRules(svc, rules)
	if err != nil {
		t.Fatal(err)
	}
	ncpu := ebpf.MustPossibleCPU()
	for _, id := range ids {
		per := make([]santaSantaRuleStats, ncpu)
		for c := range per {
			per[c] = santaSantaRuleStats{Hits: uint64(id)*10 + uint64(c), Bytes: uint64(id)*100 + uint64(c)}
		}
		if err := d.objs.RuleStats.Put(uint32(id), per); err != nil {
			t.Fatal(err)
		}
	}
	deleted := []model.RuleID{ids[5], ids[6], ids[20000]}
	if err := d.DeleteRules(deleted); err != nil {
		t.Fatal(err)
	}
	sum := func(id model.RuleID) model.RuleStats {
		var s model.RuleStats
		for c := range ncpu {
			s.Hits += uint64(id)*10 + uint64(c)
			s.Bytes += uint64(id)*100 + uint64(c)
		}
		return s
	}
	sorted := slices.Sorted(slices.Values(ids))
	var sparse []model.RuleID
	for i := 0; i < len(sorted); i += 97 {
		sparse = append(sparse, sorted[i])
	}
	for name, ask := range map[string][]model.RuleID{
		"all":    sorted,
		"sparse": sparse,
		"mixed":  append(slices.Clone(sorted[:500]), append(sparse[300:], sorted[len(sorted)-3:]...)...),
		"one":    {sorted[17]},
		"first":  {sorted[0]},
	} {
		t.Run(name, func(t *testing.T) {
			ask = slices.Compact(slices.Sorted(slices.Values(ask)))
			var want, got []model.RuleID
			for _, id := range ask {
				if !slices.Contains(deleted, id) {
					want = append(want, id)
				}
			}
			err := d.EachRuleStats(ask, func(id model.RuleID, s model.RuleStats) {
				if s != sum(id) {
					t.Fatalf("rule %d: %+v, want %+v", id, s, sum(id))
				}
				got = append(got, id)
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("read %d rules, want %d (the deleted left out)", len(got), len(want))
			}
		})
	}
	if _, err := d.RuleStats(deleted[0]); err == nil {
		t.Error("a deleted rule's counters were read")
	}
	if s, err := d.RuleStats(sorted[1]); err != nil || s != sum(sorted[1]) {
		t.Errorf("RuleStats(%d) = %+v, %v; want %+v", sorted[1], s, err, sum(sorted[1]))
	}
}
