package rule_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/santa-offload/santa/rule"
)

// TestCompileAll: rules compile on several CPUs, each into its own place,
// and an error names the first bad rule of the batch, whichever CPU saw it,
// and keeps the rule's own error.
func TestCompileAll(t *testing.T) {
	rs := make([]rule.Rule, 5000)
	for i := range rs {
		name := fmt.Sprintf("name-%d", i)
		rs[i] = rule.Rule{Condition: rule.Condition{Offset: 0, Pattern: []byte(name)},
			Processors: []rule.Processor{rule.Put(0, []byte(name+"!"))}, ReplyLen: uint16(len(name) + 1)}
	}
	got, err := rule.CompileAll(rs, rule.DefaultUDPLimits)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range got {
		if want := fmt.Sprintf("name-%d!", i); string(c.Template) != want {
			t.Fatalf("rule %d compiled to %q, want %q", i, c.Template, want)
		}
	}
	for _, bad := range [][]int{{4999}, {1500, 3000}, {0, 4000}} {
		broken := append([]rule.Rule(nil), rs...)
		for _, i := range bad {
			broken[i].ReplyLen = 0
		}
		_, err := rule.CompileAll(broken, rule.DefaultUDPLimits)
		var be *rule.BatchError
		if !errors.As(err, &be) || be.Index != bad[0] {
			t.Errorf("rules %v broken: error %v, want a *rule.BatchError naming rule %d", bad, err, bad[0])
			continue
		}
		var lim *rule.LimitError
		if !errors.As(err, &lim) || lim.Field == "" {
			t.Errorf("rules %v broken: error %v keeps no *rule.LimitError", bad, err)
		}
		if want := fmt.Sprintf("rule %d of the batch: %v", bad[0], be.Err); err.Error() != want {
			t.Errorf("error text %q, want %q", err, want)
		}
	}
	// The service's limits, not only the data plane's widest, apply.
	big := rule.Rule{Condition: rule.Condition{Pattern: []byte("x")}, ReplyLen: rule.MaxUDPReply + 1}
	if _, err := rule.CompileAll([]rule.Rule{rs[0], big}, rule.DefaultUDPLimits); !isAt(err, 1) {
		t.Errorf("a TCP-sized reply under UDP limits: %v", err)
	}
	if _, err := rule.CompileAll([]rule.Rule{rs[0], big}, rule.DefaultTCPLimits); err != nil {
		t.Errorf("a TCP-sized reply under TCP limits: %v", err)
	}
	if out, err := rule.CompileAll(nil, rule.DefaultUDPLimits); err != nil || len(out) != 0 {
		t.Errorf("no rules: %v, %d compiled", err, len(out))
	}
	if one, err := rule.CompileAll(rs[:1], rule.DefaultUDPLimits); err != nil || len(one) != 1 || string(one[0].Template) != "name-0!" {
		t.Errorf("one rule: %v, %d compiled", err, len(one))
	}
}

func isAt(err error, i int) bool {
	var be *rule.BatchError
	return errors.As(err, &be) && be.Index == i
}
