package rate

import (
	"math"
	"testing"
)

// exactLeast is the μ at which a Poisson count reaches n or more with
// probability 1e-4, by bisection on the tail.
func exactLeast(n int) float64 {
	tail := func(mu float64) float64 {
		sum, term := 0.0, math.Exp(-mu)
		for i := range n {
			sum += term
			term *= mu / float64(i+1)
		}
		return 1 - sum
	}
	lo, hi := 0.0, float64(n)
	for range 200 {
		mid := (lo + hi) / 2
		if tail(mid) > 1e-4 {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}

// Least never claims more than the exact bound, and is within 0.08 of it.
func TestLeastAgainstExact(t *testing.T) {
	for n := 1; n <= 300; n++ {
		got, want := Least(float64(n), 1), exactLeast(n)
		if got > want+1e-9 || want-got > 0.08 {
			t.Errorf("Least(%d, 1) = %.4f; the exact bound is %.4f", n, got, want)
		}
		if got2 := Least(float64(n), 2); math.Abs(got2-got/2) > 1e-12 {
			t.Errorf("Least(%d, 2) = %v; want half of Least(%d, 1) = %v", n, got2, n, got)
		}
	}
	if Least(0, 1) != 0 || Least(5, 0) != 0 {
		t.Error("no requests or no time must show no rate")
	}
}

// A key twice in a window by chance shows almost nothing; a key hot at
// once shows it at once; a key of a get or two a second shows it over the
// windows; counts older than two generations are forgotten.
func TestEvidence(t *testing.T) {
	e := NewEvidence(4)
	window := func(counts map[string]float64) {
		e.Window()
		for k, n := range counts {
			e.Add(k, Seen{n, n})
		}
	}
	window(map[string]float64{"pair": 2, "hot": 100, "warm": 2})
	if l := e.Least("pair", Seen{2, 2}, 1); l > 0.02 {
		t.Errorf("a pair in one window shows %v/s", l)
	}
	if l := e.Least("hot", Seen{100, 100}, 1); l < 60 {
		t.Errorf("100 gets in one window show %v/s; want at least 60", l)
	}
	for range 7 {
		window(map[string]float64{"warm": 2})
	}
	if l := e.Least("warm", Seen{2, 2}, 1); l < 0.5 || l > 2 {
		t.Errorf("2 gets a second over 8 windows show %v/s; want 0.5..2", l)
	}
	// Two generations on, the hot key's window is gone.
	for range 8 {
		window(nil)
	}
	if l := e.Least("hot", Seen{0, 0}, 1); l != 0 {
		t.Errorf("a key unseen for two generations shows %v/s", l)
	}
	if n := len(e.cur) + len(e.prev); n != 0 {
		t.Errorf("%d keys kept after two generations without them", n)
	}
}

// Requests scaled up from a share of them show what their counts show,
// scaled: 16 requests from 2 counts as little as 2 do, times 8.
func TestEvidenceScaled(t *testing.T) {
	e := NewEvidence(4)
	e.Window()
	e.Add("sampled", Scaled(16, 0.125))
	e.Add("all", Scaled(16, 1))
	sampled, all := e.Least("sampled", Scaled(16, 0.125), 1), e.Least("all", Scaled(16, 1), 1)
	if want := Least(2, 1) * 8; math.Abs(sampled-want) > 1e-9 || sampled >= all {
		t.Errorf("16 requests from 2 counts show %v/s, from 16 %v/s; want %v, and less", sampled, all, want)
	}
	if got := Scaled(16, 0); got != (Seen{16, 16}) {
		t.Errorf("a share of 0 (unknown) gives %+v; want every request counted", got)
	}
}
