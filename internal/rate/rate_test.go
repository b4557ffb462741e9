package rate

import (
	"math"
	"testing"
)

// A steady rate stays; a change is followed by Weight of the way each
// window.
func TestSmooth(t *testing.T) {
	for _, c := range []struct{ old, now, want float64 }{
		{10, 10, 10},
		{0, 10, 3},
		{10, 0, 7},
		{100, 200, 130},
	} {
		if got := Smooth(c.old, c.now); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Smooth(%v, %v) = %v, want %v", c.old, c.now, got, c.want)
		}
	}
}
