package datapath

import (
	"testing"

	"github.com/santa-offload/santa/internal/rules"
)

// The rules package mirrors santa_abi.h's #define limits (BTF carries no
// macros); the generated structs carry their sizes. They must agree.
func TestRuleLimitsMatchABI(t *testing.T) {
	var r santaSantaRule
	var n santaSantaIndexNode
	var s santaSantaService
	for _, c := range []struct {
		name      string
		abi, rule int
	}{
		{"condition pattern", len(r.Cond), rules.MaxCondLen},
		{"reply", len(r.Reply), rules.MaxUDPReply},
		{"copies", len(r.Copies), rules.MaxCopies},
		{"node slots", len(n.Slots), rules.NodeSlots},
		{"regions", len(s.Regions), rules.MaxRegions},
	} {
		if c.abi != c.rule {
			t.Errorf("%s: santa_abi.h has %d, internal/rules %d", c.name, c.abi, c.rule)
		}
	}
}
