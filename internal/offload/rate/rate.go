// Package rate smooths the request rates the offload agents rank forms by.
package rate

// Weight is the weight of the latest window's rate. A form's requests in
// one window vary by about their square root: taken raw, a form of the
// top set loses its place to one half as frequent that had a lucky
// window, and both are learned and deleted in turn. santad smooths the
// passes of its hot sets alike (internal/datapath/learn.go).
const Weight = 0.3

// Smooth is the smoothed rate after a window at rate now, from old.
func Smooth(old, now float64) float64 { return old + Weight*(now-old) }
