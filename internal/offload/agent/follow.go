package agent

import (
	"context"
	"time"
)

// follow runs a window each time santad's hot sets are of a window the
// agent has not read yet: it asks every tenth of a Window (hotPolls a
// Window) for the number of the newest set, in a one-form read. A window
// thus starts within a tenth of a Window of the set it reads, and reads
// each set once: on its own clock, the agent read the same set twice in
// about one window of ten, and the sets it read were half a window old on
// average (docs/benchmarks.md (h)). From a santad that does not number
// its sets (protocol version 4 and older), and while no service is
// attached, a window runs every Window. Only the window loop calls it.
func (a *agent) follow(ctx context.Context) {
	n, numbered := a.hotNumber()
	if numbered && n == a.lastHot || !numbered && a.now().Sub(a.lastWindow) < time.Duration(a.cfg.Window) {
		return
	}
	a.lastHot, a.lastWindow = n, a.now()
	a.window(ctx)
}

// hotPolls is how many times a Window the agent asks whether a new hot set
// is there.
const hotPolls = 10

// hotNumber is the number of the newest hot set of any service, if
// santad numbers them (one learner numbers every service's sets alike);
// false if it does not, or no service can tell. A failed read is left to
// the window, which reads the sets again.
func (a *agent) hotNumber() (uint32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sd == nil {
		return 0, false
	}
	for _, sv := range a.services {
		h, err := a.sd.Hot(sv.id, 1)
		return h.Number, err == nil && h.Number != 0
	}
	return 0, false
}
