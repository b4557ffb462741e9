package popularity

import (
	"math"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Popularity{"uniform": Uniform, "zipf:0.99": {Zipf: true, S: 0.99}, "zipf:1": {Zipf: true, S: 1}} {
		got, err := Parse(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("Parse(%q) = %v (%q), %v; want %v", in, got, got.String(), err, want)
		}
	}
	for _, bad := range []string{"", "zipf", "zipf:", "zipf:-1", "zipf:x", "zipf:NaN", "zipf:nan", "zipf:Inf", "pareto:1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// Draws follow the distribution: with Zipf s=1 over 1000 requests, request
// k is drawn in proportion to 1/k; uniform draws are flat.
func TestSequenceDistribution(t *testing.T) {
	const n, draws = 1000, 1 << 20
	count := func(p Popularity) []float64 {
		c := make([]float64, n)
		for _, i := range p.Sequence(n, draws, 1) {
			c[i]++
		}
		return c
	}
	h := 0.0 // harmonic number H(n): the Zipf s=1 normaliser
	for k := 1; k <= n; k++ {
		h += 1 / float64(k)
	}
	zipf := count(Popularity{Zipf: true, S: 1})
	for _, k := range []int{1, 2, 10, 100} {
		want := draws / (float64(k) * h)
		if got := zipf[k-1]; math.Abs(got-want) > 5*math.Sqrt(want) {
			t.Errorf("zipf:1: request %d drawn %.0f times, want about %.0f", k, got, want)
		}
	}
	flat := count(Uniform)
	for _, k := range []int{0, 500, 999} {
		want := float64(draws) / n
		if got := flat[k]; math.Abs(got-want) > 5*math.Sqrt(want) {
			t.Errorf("uniform: request %d drawn %.0f times, want about %.0f", k, got, want)
		}
	}
}
