package mcparse_test

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// FuzzMcParse feeds random request and reply streams, cut at random
// points, to the Go reference and to the data plane's parsers: both must
// report the same events and reach the same states, and the Go
// reference's must not depend on the cuts.
func FuzzMcParse(f *testing.F) {
	p := load(f)
	for _, fx := range fixtures {
		f.Add([]byte(fx.requests), []byte(fx.replies), uint64(len(fx.name)))
	}
	f.Add([]byte(session.requests()), []byte(session.replies), uint64(7))
	f.Fuzz(func(t *testing.T, requests, replies []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		reqCuts, repCuts := cuts(rng, len(requests)), cuts(rng, len(replies))
		want := goRun(t, requests, replies, nil, nil)
		same(t, "Go, cut", goRun(t, requests, replies, reqCuts, repCuts), want)
		same(t, "data plane, cut", bpfRun(t, p, requests, replies, reqCuts, repCuts), want)
	})
}

// cuts picks up to 8 increasing cut points in [1, n).
func cuts(rng *rand.Rand, n int) []int {
	if n < 2 {
		return nil
	}
	var c []int
	for range rng.IntN(9) {
		c = append(c, 1+rng.IntN(n-1))
	}
	slices.Sort(c)
	return slices.Compact(c)
}
