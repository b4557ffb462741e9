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

// A span of windows weighs as much as that many windows at its rate.
func TestSmoothOver(t *testing.T) {
	old := 100.0
	byWindow := old
	for range 4 {
		byWindow = Smooth(byWindow, 20)
	}
	if got := SmoothOver(old, 20, 4); math.Abs(got-byWindow) > 1e-9 {
		t.Errorf("SmoothOver(100, 20, 4) = %v; four windows of Smooth give %v", got, byWindow)
	}
	if got := SmoothOver(old, 20, 1); math.Abs(got-Smooth(old, 20)) > 1e-9 {
		t.Errorf("SmoothOver over one window = %v, want Smooth's %v", got, Smooth(old, 20))
	}
	if got := SmoothOver(old, 20, 0); got != old {
		t.Errorf("SmoothOver over no window = %v, want %v", got, old)
	}
}
