package cli

import (
	"bytes"
	"slices"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// TestRuleSize checks ruleSize, and batchRoom, against the encoder.
func TestRuleSize(t *testing.T) {
	for _, r := range []rule.Rule{hello, dns, hi} {
		msg, err := protocol.Encode(protocol.MaxVersion, 1, &protocol.AddRules{ServiceID: 7, Txn: 1, Rules: []rule.Rule{r}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := protocol.MaxMessage-batchRoom+ruleSize(r), len(msg); got != want {
			t.Errorf("rule %q: header and ruleSize make %d bytes; the message is %d", r.Condition.Pattern, got, want)
		}
	}
}

// TestBatches checks that batches fill messages to the brim and no further.
func TestBatches(t *testing.T) {
	big := rule.Rule{Condition: rule.Condition{Pattern: bytes.Repeat([]byte("a"), 256)},
		Processors: []rule.Processor{rule.Put(0, bytes.Repeat([]byte("b"), 1400))}, ReplyLen: 1400}
	perMessage := batchRoom / ruleSize(big)
	rs := slices.Repeat([]rule.Rule{big}, 2*perMessage+1)
	var starts, sizes []int
	for start, batch := range batches(rs, ruleSize) {
		starts, sizes = append(starts, start), append(sizes, len(batch))
		if _, err := protocol.Encode(protocol.MaxVersion, 1, &protocol.AddRules{ServiceID: 7, Txn: 1, Rules: batch}); err != nil {
			t.Errorf("batch at %d: %v", start, err)
		}
	}
	if want := []int{0, perMessage, 2 * perMessage}; !slices.Equal(starts, want) {
		t.Errorf("batches start at %v, want %v", starts, want)
	}
	if want := []int{perMessage, perMessage, 1}; !slices.Equal(sizes, want) {
		t.Errorf("batches hold %v rules, want %v", sizes, want)
	}
	for range batches([]rule.Rule{}, ruleSize) {
		t.Error("no rules make a batch")
	}
}
