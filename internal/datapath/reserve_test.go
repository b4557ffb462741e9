package datapath

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// A transaction's ids are known before its rules land: rules land under
// the reserved ids, a refused batch lands none, and what did not land is
// given back.
func TestReservedRuleIDs(t *testing.T) {
	d := openTest(t)
	svc := register(t, d, boundUDP(t, "127.0.0.1:0"))
	ids, err := d.ReserveRuleIDs(3)
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.AddRule(svc, hello())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids, first) {
		t.Fatalf("rule %d was given a reserved id (%v)", first, ids)
	}

	apply := func(b model.Batch) ([]model.RuleID, error) {
		if err := d.compile(svc, &b); err != nil {
			t.Fatal(err)
		}
		return d.Apply(svc, b)
	}
	// Refused: a duplicate condition. The ids stay reserved.
	dup := []rule.Rule{numbered(1), hello(), numbered(3)}
	if _, err := apply(model.Batch{Add: dup, AddIDs: ids}); err == nil || !strings.Contains(err.Error(), "same condition") {
		t.Fatalf("a batch with a duplicate condition: %v, want it refused for its duplicate", err)
	}
	got, err := apply(model.Batch{Add: []rule.Rule{numbered(1), numbered(2), numbered(3)}, AddIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("rules landed under ids %v, want the reserved %v", got, ids)
	}
	d.ReleaseRuleIDs(ids) // landed: nothing to give back
	installed, err := d.Rules(svc)
	if err != nil || len(installed) != 4 {
		t.Fatalf("service holds %d rules (%v), want 4", len(installed), err)
	}

	// Released ids are handed out again; landed ones never.
	spare, err := d.ReserveRuleIDs(2)
	if err != nil {
		t.Fatal(err)
	}
	d.ReleaseRuleIDs(spare)
	next, err := d.AddRule(svc, numbered(4))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(spare, next) {
		t.Errorf("rule got id %d, want one of the released %v", next, spare)
	}
}

// Reserved ids count against the capacity.
func TestReserveBeyondCapacity(t *testing.T) {
	d := openTestWith(t, Options{MaxRules: 4})
	if _, err := d.ReserveRuleIDs(5); !errors.Is(err, model.ErrCapacity) {
		t.Fatalf("reserving 5 of 4 gives %v, want model.ErrCapacity", err)
	}
	if _, err := d.ReserveRuleIDs(4); err != nil {
		t.Fatalf("reserving all 4 after a refusal: %v", err)
	}
}

// numbered is a rule whose condition is "rule-N".
func numbered(n int) rule.Rule {
	r := hello()
	r.Condition.Pattern = []byte{'r', 'u', 'l', 'e', '-', byte('0' + n)}
	return r
}
