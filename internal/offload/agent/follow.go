package agent

import (
	"context"
	"time"
)

// follow runs a window each time santad's hot sets are of a window the
// agent has not read yet, and a Window at least after the last: it asks
// hotPolls times a Window for the number of the newest set, in a one-form
// read. A window thus starts within a tenth of a Window of the set it
// reads, and reads each set once: on its own clock, the agent read the
// same set twice in about one window of ten, and the sets it read were
// half a window old on average (docs/benchmarks.md (h)). From a santad
// that does not number its sets (protocol version 4 and older), and while
// no service tells a number, a window runs every Window; and whatever the
// numbers say, at least every hotStale Windows (a learner that stopped
// stepping must not stop the rankings, retries and skips). Only the
// window loop calls it.
func (a *agent) follow(ctx context.Context) {
	window := time.Duration(a.cfg.Window)
	// Half a poll early is on time: the polls' ticks and santad's steps
	// drift against each other.
	since := a.now().Sub(a.lastWindow)
	if since < window-a.hotPoll()/2 {
		return
	}
	n, numbered := a.hotNumber()
	if numbered && n == a.lastHot && since < hotStale*window {
		return
	}
	if numbered {
		a.lastHot = n
	}
	a.lastWindow = a.now()
	a.window(ctx)
}

// hotPolls is how many times a Window the agent asks whether a new hot set
// is there; hotStale how many Windows it waits for one at most; hotAsks
// how many services a poll asks at most.
const (
	hotPolls = 10
	hotStale = 3
	hotAsks  = 3
)

// hotPoll is how often follow asks.
func (a *agent) hotPoll() time.Duration {
	return max(time.Duration(a.cfg.Window)/hotPolls, time.Millisecond)
}

// hotNumber is the number of the newest hot set, from the first of at
// most hotAsks services that tells one (one learner numbers every
// service's sets alike); false if none does: santad does not number
// them, or the services asked have not learned for a whole window yet
// (or just closed). A failed read is left to the window, which reads the
// sets again.
func (a *agent) hotNumber() (uint32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sd == nil {
		return 0, false
	}
	asked := 0
	for _, sv := range a.services {
		if h, err := a.sd.Hot(sv.id, 1); err == nil && h.Number != 0 {
			return h.Number, true
		}
		if asked++; asked == hotAsks {
			break
		}
	}
	return 0, false
}
