package protocol

import (
	"math/rand/v2"
	"testing"

	"github.com/santa-offload/santa/internal/pkttest"
)

// RuleEntrySize is what one more entry adds to an encoded LIST_RULES page.
func TestRuleEntrySize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	empty, _ := Encode(0, &ListRulesReply{})
	for range 200 {
		e := RuleEntry{RuleID: rng.Uint32(), Rule: pkttest.RandomRule(rng, 64)}
		one, err := Encode(0, &ListRulesReply{Rules: []RuleEntry{e}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := RuleEntrySize(&e), len(one)-len(empty); got != want {
			t.Fatalf("RuleEntrySize = %d; the encoder takes %d bytes for %+v", got, want, e)
		}
	}
}
