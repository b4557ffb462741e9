package agent

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// selectBest puts the best k first, whatever the order and the ties.
func TestSelectBest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := r.IntN(60)
		s := make([]int, n)
		for i := range s {
			s[i] = r.IntN(1 + trial%20) // few values: many ties
		}
		k := r.IntN(n+3) - 1
		sorted := slices.Sorted(slices.Values(s))
		got := selectBest(s, k, cmp.Compare[int])
		want := sorted[:min(max(k, 0), n)]
		if !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Fatalf("selectBest(%v, %d) = %v; want %v in some order", s, k, got, want)
		}
		if !slices.Equal(slices.Sorted(slices.Values(s)), sorted) {
			t.Fatalf("selectBest changed the elements: %v; had %v", s, sorted)
		}
	}
}
