package rate

import "math"

// doubtZ is the standard normal quantile of the doubt Least allows: a 1
// in 10,000 chance that the rate it gives is above the true one. An agent
// weighs up to a few thousand newcomers a window, so at most about one a
// window is taken for hotter than it is by chance.
const doubtZ = 3.719

// Least is the least rate that count requests in seconds show: the lower
// bound of a Poisson rate at the doubt above, by the Wilson–Hilferty
// approximation (within a few per cent of the exact bound from 2 requests
// up; 0 for none or one). Ranking newcomers by it, not by their raw count,
// keeps noise from displacing offloaded requests: at the edge of a 100,000
// key hot set of a 1M-key Zipf popularity, rates are a fraction of a
// request a second, and thousands of the tail's keys are seen twice in a
// second by chance alone; each displacement asks the server and changes
// the index, for no gain (docs/benchmarks.md (j)).
func Least(count, seconds float64) float64 {
	if count <= 0 || seconds <= 0 {
		return 0
	}
	c := 1 - 1/(9*count) - doubtZ/(3*math.Sqrt(count))
	if c <= 0 {
		return 0
	}
	return count * c * c * c / seconds
}

// Evidence sums the requests of keys not offloaded over the last windows,
// so that a key's least rate also rests on its past windows: a key of a
// request a second shows it after some seconds, where one window never
// does. Two generations of span windows each: the older is dropped when
// the newer is full, which bounds the memory to the keys seen in 2 × span
// windows.
type Evidence struct {
	span      int
	cur, prev map[string]float64
	// Windows counted into cur and prev; prev's is 0 before the first
	// generation ends.
	curWindows, prevWindows int
}

// NewEvidence keeps generations of span windows.
func NewEvidence(span int) *Evidence {
	return &Evidence{span: max(1, span), cur: map[string]float64{}}
}

// Window starts a window: the counts added next are its.
func (e *Evidence) Window() {
	if e.curWindows == e.span {
		e.prev, e.prevWindows = e.cur, e.curWindows
		e.cur, e.curWindows = make(map[string]float64, len(e.prev)), 0
	}
	e.curWindows++
}

// Add counts requests of key in the current window.
func (e *Evidence) Add(key string, requests float64) { e.cur[key] += requests }

// Least is key's least rate over the current window (last requests), the
// current generation, and both: the best of the three, so that a key
// suddenly hot shows it at once, and a key steadily warm over time.
func (e *Evidence) Least(key string, last float64, window float64) float64 {
	cur := e.cur[key]
	all := cur + e.prev[key]
	return max(Least(last, window),
		Least(cur, float64(e.curWindows)*window),
		Least(all, float64(e.curWindows+e.prevWindows)*window))
}
