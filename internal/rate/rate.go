// Package rate smooths request rates over windows: santad's hot sets
// (internal/datapath/learn.go) and the offload agents' ranking alike.
package rate

import "math"

// Weight is the weight of the latest window's rate. A form's requests in
// one window vary by about their square root: taken raw, a form of the
// top set loses its place to one half as frequent that had a lucky
// window, and an agent learns and deletes both in turn.
const Weight = 0.3

// Smooth is the smoothed rate after a window at rate now, from old.
func Smooth(old, now float64) float64 { return old + Weight*(now-old) }

// SmoothOver is the smoothed rate after windows windows at rate now,
// from old: as if each of them had been at now, so that a rate read
// after a longer span than usual follows a change as far as the usual
// spans in it would have.
func SmoothOver(old, now, windows float64) float64 {
	return old + (1-math.Pow(1-Weight, windows))*(now-old)
}
