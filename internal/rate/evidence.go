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

// Seen is what a window showed of a key: its requests, scaled up to every
// one that passed, and the counts they rest on. Under load the data plane
// counts a share of the passed requests (santad's hot set tells which),
// and a key's scaled figure of 8 from one count shows as little as one
// request does.
type Seen struct{ Requests, Counts float64 }

// Scaled is requests that rest on share of them (0 < share <= 1; any
// other share: all of them).
func Scaled(requests, share float64) Seen {
	if share <= 0 || share > 1 {
		share = 1
	}
	return Seen{Requests: requests, Counts: requests * share}
}

// least is the least rate s shows over seconds: its counts' bound, scaled
// up as its requests are.
func (s Seen) least(seconds float64) float64 {
	if s.Counts <= 0 {
		return 0
	}
	return Least(s.Counts, seconds) * s.Requests / s.Counts
}

func (s Seen) plus(o Seen) Seen { return Seen{s.Requests + o.Requests, s.Counts + o.Counts} }

// Evidence sums the requests of keys not offloaded over the last windows,
// so that a key's least rate also rests on its past windows: a key of a
// request a second shows it after some seconds, where one window never
// does. Two generations of span windows each: the older is dropped when
// the newer is full, which bounds the memory to the keys seen in 2 × span
// windows.
type Evidence struct {
	span      int
	cur, prev map[string]Seen
	// Windows counted into cur and prev; prev's is 0 before the first
	// generation ends.
	curWindows, prevWindows int
}

// NewEvidence keeps generations of span windows.
func NewEvidence(span int) *Evidence {
	return &Evidence{span: max(1, span), cur: map[string]Seen{}}
}

// Window starts a window: the counts added next are its.
func (e *Evidence) Window() {
	if e.curWindows == e.span {
		e.prev, e.prevWindows = e.cur, e.curWindows
		e.cur, e.curWindows = make(map[string]Seen, len(e.prev)), 0
	}
	e.curWindows++
}

// Add counts what the current window showed of key.
func (e *Evidence) Add(key string, seen Seen) { e.cur[key] = e.cur[key].plus(seen) }

// Least is key's least rate over the current window (last), the current
// generation, and both: the best of the three, so that a key suddenly hot
// shows it at once, and a key steadily warm over time.
func (e *Evidence) Least(key string, last Seen, window float64) float64 {
	cur := e.cur[key]
	all := cur.plus(e.prev[key])
	return max(last.least(window),
		cur.least(float64(e.curWindows)*window),
		all.least(float64(e.curWindows+e.prevWindows)*window))
}
