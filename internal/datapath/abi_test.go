package datapath

import (
	"testing"

	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

// The rule and rules packages mirror santa_abi.h's #define limits (BTF carries no
// macros); the generated structs carry their sizes. They must agree.
func TestRuleLimitsMatchABI(t *testing.T) {
	var r santaSantaRuleLarge
	var n santaSantaIndexNode
	var s santaSantaService
	for _, c := range []struct {
		name        string
		abi, mirror int
	}{
		{"condition pattern", len(r.Rule.Cond), rule.MaxCondLen},
		{"reply", len(r.Reply), rule.MaxUDPReply},
		{"copies", len(r.Rule.Copies), rule.MaxCopies},
		{"node slots", len(n.Slots), rules.NodeSlots},
		{"regions", len(s.Regions), rule.MaxRegions},
	} {
		if c.abi != c.mirror {
			t.Errorf("%s: santa_abi.h has %d, Go %d", c.name, c.abi, c.mirror)
		}
	}
}

// A reply goes to the smallest class that holds it, and the class stays in
// its slot next to the slot's number.
func TestRuleClasses(t *testing.T) {
	small, medium := len(santaSantaRuleSmall{}.Reply), len(santaSantaRuleMedium{}.Reply)
	for _, c := range []struct {
		reply int
		want  santaSantaRuleClass
	}{
		{1, smallRule}, {small, smallRule}, {small + 1, mediumRule},
		{medium, mediumRule}, {medium + 1, largeRule}, {rule.MaxUDPReply, largeRule},
	} {
		if got := classOf(c.reply); got != c.want {
			t.Errorf("classOf(%d) = %v, want %v", c.reply, got, c.want)
		}
		slot := classSlot(12345, c.want)
		if slotNumber(slot) != 12345 || slotClass(slot) != c.want {
			t.Errorf("slot %#x of class %v: number %d, class %v", slot, c.want, slotNumber(slot), slotClass(slot))
		}
	}
}
