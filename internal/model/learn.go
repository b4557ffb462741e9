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
	Number   uint32
	Total    int
	Requests []HotRequest
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
)

// ErrNotLearning: the service's learning is off.
var ErrNotLearning = errors.New("learning is off: LEARN turns it on")
