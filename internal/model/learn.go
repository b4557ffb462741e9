package model

import (
	"errors"
	"time"
)

// Learning is what a UDP service's data plane counts of the requests it
// passes (no rule answered): each by its key, payload[KeyOffset:], for
// an agent to find the forms worth a rule (docs/architecture.md,
// "Learning the hot requests").
type Learning struct {
	KeyOffset uint16
	// ProbePort is the UDP source port (host order) of the agent's own
	// requests to the server: they are never answered by a rule and never
	// counted. 0: none.
	ProbePort uint16
	Enabled   bool
	// Counts is the most passed requests a CPU counts a window while the
	// service learns, 1 to MaxLearnCounts (0: MaxLearnCounts): a manager
	// whose hot set is settled counts fewer, which costs the server's
	// core less. The data plane's bound is one for every service, the
	// largest any learning service asks.
	Counts uint32
}

// HotRequest is one request form a service passed: its key and how many
// times it passed in the window.
type HotRequest struct {
	Passes uint32
	Key    []byte
}

// HotSet is a service's most passed request forms of the last complete
// window, most first: all of them, or a page (Total tells how many the
// whole set holds).
type HotSet struct {
	Window time.Duration // the window the counts cover; 0 before the first ends
	// Number is the window's, one more each window the learner steps: the
	// set of a later window has another (0 before the service's first).
	Number uint32
	Total  int
	// CountedPPM is the share of the window's passed requests the data
	// plane counted, in millionths: Passes are scaled up to all of them,
	// and a form's figure rests on Passes * CountedPPM / 10^6 counts.
	CountedPPM uint32
	Requests   []HotRequest
}

// Page is h with at most n of its requests, from the one at index from
// on, and Total the whole set's size. Its requests are h's, not a copy.
func (h HotSet) Page(from, n int) HotSet {
	h.Total = len(h.Requests)
	from = min(max(from, 0), h.Total)
	h.Requests = h.Requests[from:min(from+max(n, 0), h.Total)]
	return h
}

// Learning's limits: a key longer than MaxLearnKey is not counted, and
// KeyOffset is at most MaxLearnOffset (santa_abi.h's SANTA_LEARN_MAX_KEY
// and SANTA_LEARN_MAX_OFF, checked by internal/datapath's
// TestABIConstants).
const (
	MaxLearnKey    = 256
	MaxLearnOffset = 1023
	// MaxLearnCounts is the most passed requests a CPU counts a window,
	// and the default: counting one is two lookups of large hash tables
	// (~0.7 µs at 1M keys on a VM, 7 % of a CPU at this many a second),
	// and under overload a CPU passes far more requests than a server's
	// socket takes.
	MaxLearnCounts = 100000
)

// ErrNotLearning: the service's learning is off.
var ErrNotLearning = errors.New("learning is off: LEARN turns it on")
