package mcagent

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMerged: merging the offloaded keys (sorted by rate) with the
// newcomers (sorted byScore) gives the order one sort of all of them
// byScore gives, ties between both kinds and equal rates included.
func TestMerged(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	score := func(k *key) float64 { return k.rate*1.25 + 0.5 }
	for round := range 200 {
		a := &agent{keys: map[string]*key{}}
		var all, newcomers []candidate
		seqs := r.Perm(50) // each key's own, as the agent numbers them
		for i := range r.IntN(50) {
			k := &key{form: fmt.Sprintf("k%d", i), seq: uint64(seqs[i]), rate: float64(r.IntN(8))}
			a.keys[k.form] = k
			all = append(all, candidate{form: k.form, k: k, score: score(k)})
		}
		for i := range r.IntN(20) {
			c := candidate{form: fmt.Sprintf("n%d", i), score: float64(r.IntN(20)) / 2}
			newcomers = append(newcomers, c)
			all = append(all, c)
		}
		slices.SortFunc(newcomers, byScore)
		slices.SortFunc(all, byScore)
		got := slices.Collect(merged(a.sortedKeys(), newcomers, score))
		if !slices.EqualFunc(got, all, func(x, y candidate) bool { return x.form == y.form }) {
			t.Fatalf("round %d: merged %v, want %v", round, forms(got), forms(all))
		}
	}
}

func forms(cs []candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.form
	}
	return out
}
