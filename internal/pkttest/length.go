package pkttest

import (
	"math/rand/v2"

	"github.com/santa-offload/santa/rule"
)

// Request-length ranges for the differential tests (internal/rules against
// its reference, the kernel against both).

// RandomLength gives r's condition, about half the time, a length range
// near the shortest request r can answer (its condition's end, its copies'
// sources): exactly one length, a closed range, or one without an upper
// bound.
func RandomLength(rng *rand.Rand, r rule.Rule) rule.Rule {
	need := r.Condition.End()
	for _, p := range r.Processors {
		if p.Kind == rule.ProcessorCopy {
			need = max(need, int(p.SrcOffset)+int(p.Length))
		}
	}
	min := uint16(need + rng.IntN(6))
	switch rng.IntN(6) {
	case 0:
		r.Condition = rule.ExactLength(r.Condition, min)
	case 1:
		r.Condition.MinLen, r.Condition.MaxLen = min, min+uint16(1+rng.IntN(20))
	case 2:
		r.Condition.MinLen = min
	}
	return r
}

// OtherLength is c's offset and pattern with an exact length none of
// earlier's ranges allows (they all share c's offset and pattern): a rule
// that may sit beside them in one service. ok is false if one of them has
// no upper bound, so that no such length is left.
func OtherLength(rng *rand.Rand, c rule.Condition, earlier []rule.Condition) (_ rule.Condition, ok bool) {
	n := c.End() + rng.IntN(4)
	for _, e := range earlier {
		if e.MaxLen == 0 {
			return c, false
		}
		n = max(n, int(e.MaxLen)+1+rng.IntN(3))
	}
	return rule.ExactLength(c, uint16(n)), true
}

// LengthNear is a payload length to test c with: without a range, n;
// with one, a length at an edge of the range or one byte beyond it (never
// shorter than c's end, which would not test the range).
func LengthNear(rng *rand.Rand, c rule.Condition, n int) int {
	if !c.HasLength() {
		return n
	}
	edges := []int{int(c.MinLen) - 1, int(c.MinLen), int(c.MinLen) + 1}
	if c.MaxLen != 0 {
		edges = append(edges, int(c.MaxLen)-1, int(c.MaxLen), int(c.MaxLen)+1)
	} else {
		edges = append(edges, int(c.MinLen)+rng.IntN(200))
	}
	return max(c.End(), edges[rng.IntN(len(edges))])
}
