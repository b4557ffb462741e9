package datapath

import (
	"fmt"
	"strings"
	"testing"

	"github.com/santa-offload/santa/rule"
)

// TestCompileAll: rules compile on several CPUs, each into its own place,
// and an error names the first bad rule of the batch, whichever CPU saw it.
func TestCompileAll(t *testing.T) {
	rs := make([]rule.Rule, 5000)
	for i := range rs {
		name := fmt.Sprintf("name-%d", i)
		rs[i] = rule.Rule{Condition: rule.Condition{Offset: 0, Pattern: []byte(name)},
			Processors: []rule.Processor{rule.Put(0, []byte(name+"!"))}, ReplyLen: uint16(len(name) + 1)}
	}
	got, err := compileAll(rs, rule.DefaultUDPLimits)
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
		_, err := compileAll(broken, rule.DefaultUDPLimits)
		if want := fmt.Sprintf("rule %d of the batch: ", bad[0]); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("rules %v broken: error %v, want one naming rule %d (%q)", bad, err, bad[0], want)
		}
	}
	if _, err := compileAll(nil, rule.DefaultUDPLimits); err != nil {
		t.Errorf("no rules: %v", err)
	}
	if one, err := compileAll(rs[:1], rule.DefaultUDPLimits); err != nil || len(one) != 1 || string(one[0].Template) != "name-0!" {
		t.Errorf("one rule: %v, %d compiled", err, len(one))
	}
}
