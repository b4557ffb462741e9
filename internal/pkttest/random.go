package pkttest

import (
	"math/rand/v2"

	"github.com/santa-offload/santa/rule"
)

// RandomRule is a rule with a one-byte condition and up to MaxProcessors
// random puts and copies over a reply of at most 40 bytes, copying from
// request offsets below maxSrc: later processors often overwrite parts of
// earlier ones, which is what compiling a rule has to resolve.
func RandomRule(rng *rand.Rand, maxSrc int) rule.Rule {
	r := rule.Rule{Condition: rule.Condition{Pattern: []byte("x")}, ReplyLen: uint16(1 + rng.IntN(40))}
	for range rng.IntN(rule.MaxProcessors + 1) {
		dst := rng.IntN(int(r.ReplyLen))
		n := 1 + rng.IntN(int(r.ReplyLen)-dst)
		if rng.IntN(2) == 0 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(1 + rng.IntN(255))
			}
			r.Processors = append(r.Processors, rule.Put(uint16(dst), b))
		} else {
			r.Processors = append(r.Processors, rule.Copy(uint16(rng.IntN(maxSrc)), uint16(n), uint16(dst)))
		}
	}
	return r
}
