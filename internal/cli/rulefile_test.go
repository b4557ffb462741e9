package cli

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

// What santactl reads of each rule file of testdata/rulefiles, accepted or
// refused: rulefile_shared_test.go.

// TestRuleFileRoundTrip checks that what rules -json prints is a rule file
// of the same rules.
func TestRuleFileRoundTrip(t *testing.T) {
	want := []rule.Rule{hello, dns, hi}
	f := ruleFile{}
	for i, r := range want {
		f.Rules = append(f.Rules, newJSONRule(client.RuleEntry{RuleID: uint32(i + 1), Rule: r}))
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(f); err != nil {
		t.Fatal(err)
	}
	got, err := parseRuleFile(b.Bytes())
	if err != nil || !slices.EqualFunc(got, want, sameRule) {
		t.Errorf("the rules printed as %s read back as %+v, %v", b.String(), got, err)
	}
}

func sameRule(a, b rule.Rule) bool {
	return a.ReplyLen == b.ReplyLen && a.Condition.Offset == b.Condition.Offset &&
		a.Condition.MinLen == b.Condition.MinLen && a.Condition.MaxLen == b.Condition.MaxLen &&
		bytes.Equal(a.Condition.Pattern, b.Condition.Pattern) &&
		slices.EqualFunc(a.Processors, b.Processors, func(p, q rule.Processor) bool {
			return p.Kind == q.Kind && p.DstOffset == q.DstOffset && p.SrcOffset == q.SrcOffset &&
				p.Length == q.Length && bytes.Equal(p.Bytes, q.Bytes)
		})
}
