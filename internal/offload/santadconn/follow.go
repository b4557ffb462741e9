package santadconn

import (
	"iter"
	"time"

	"github.com/santa-offload/santa/client"
)

// Follower times an agent's windows by santad's hot sets: a window runs
// each time the sets are of a window the agent has not read yet, and a
// Window at least after the last. Asked Polls times a Window, it starts a
// window within a tenth of a Window of the set it reads, and reads each set
// once: on its own clock, the DNS agent read the same set twice in about
// one window of ten, and the sets it read were half a window old on average
// (docs/benchmarks.md (h)). From a santad that does not number its sets
// (protocol version 4 and older), and while no service tells a number, a
// window runs every Window; and whatever the numbers say, at least every
// Stale Windows (a learner that stopped stepping must not stop the
// rankings, retries and skips). Only the agent's window loop uses it.
type Follower struct {
	window     time.Duration
	last       uint32    // the number of the last set read
	lastWindow time.Time // when the last window started
}

// Polls is how many times a Window a Follower asks whether a new hot set is
// there; Stale how many Windows it waits for one at most.
const (
	Polls = 10
	Stale = 3
)

// NewFollower follows santad's hot sets for an agent whose windows are
// window long.
func NewFollower(window time.Duration) *Follower { return &Follower{window: window} }

// Poll is how often Due is to be asked.
func (f *Follower) Poll() time.Duration { return max(f.window/Polls, time.Millisecond) }

// Due is whether a window starts at now (it is then noted as started).
// number is the newest hot set's number, false if none is told (HotNumber);
// it is asked only once a Window has nearly passed since the last window:
// half a poll early is on time, as the polls' ticks and santad's steps
// drift against each other.
func (f *Follower) Due(now time.Time, number func() (uint32, bool)) bool {
	since := now.Sub(f.lastWindow)
	if since < f.window-f.Poll()/2 {
		return false
	}
	n, numbered := number()
	if numbered && n == f.last && since < Stale*f.window {
		return false
	}
	if numbered {
		f.last = n
	}
	f.lastWindow = now
	return true
}

// hotAsks is how many services HotNumber asks at most.
const hotAsks = 3

// HotNumber is the number of the newest hot set, from the first of at most
// hotAsks services that tells one (one learner numbers every service's
// sets alike), read with hot (a one-form read); false if none does: santad
// does not number them, or the services asked have not learned for a whole
// window yet (or just closed). A failed read is left to the window, which
// reads the sets again.
func HotNumber(hot func(service uint32, max int) (client.HotSet, error), services iter.Seq[uint32]) (uint32, bool) {
	asked := 0
	for id := range services {
		if h, err := hot(id, 1); err == nil && h.Number != 0 {
			return h.Number, true
		}
		if asked++; asked == hotAsks {
			break
		}
	}
	return 0, false
}
