package protocol

import (
	"math/rand/v2"
	"testing"

	"github.com/santa-offload/santa/internal/pkttest"
)

// RuleEntrySize is what one more entry adds to an encoded LIST_RULES page,
// in either version (version 2 with length conditions too).
func TestRuleEntrySize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for v := uint16(MinVersion); v <= MaxVersion; v++ {
		empty, _ := Encode(v, 0, &ListRulesReply{})
		for range 200 {
			e := RuleEntry{RuleID: rng.Uint32(), Rule: pkttest.RandomRule(rng, 64)}
			if v >= Version2 {
				e.Rule = pkttest.RandomLength(rng, e.Rule)
			}
			one, err := Encode(v, 0, &ListRulesReply{Rules: []RuleEntry{e}})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := RuleEntrySize(v, &e), len(one)-len(empty); got != want {
				t.Fatalf("version %d: RuleEntrySize = %d; the encoder takes %d bytes for %+v", v, got, want, e)
			}
		}
	}
}
