// Package rate smooths request rates over windows: santad's hot sets
// (internal/datapath/learn.go) and the offload agents' ranking alike.
package rate

// Weight is the weight of the latest window's rate. A form's requests in
// one window vary by about their square root: taken raw, a form of the
// top set loses its place to one half as frequent that had a lucky
// window, and an agent learns and deletes both in turn.
const Weight = 0.3

// Smooth is the smoothed rate after a window at rate now, from old.
func Smooth(old, now float64) float64 { return old + Weight*(now-old) }
