package client

import (
	"fmt"
	"math"
	"time"

	"github.com/santa-offload/santa/internal/protocol"
)

// Learning is what santad's data plane counts of a UDP service's passed
// requests (those no rule answered): each by its key, the payload from
// KeyOffset on (for DNS, 2: everything after the transaction id).
type Learning struct {
	KeyOffset uint16
	// ProbePort is the UDP source port (host order) the caller asks the
	// server from: its requests are never answered by a rule and never
	// counted. 0: none.
	ProbePort uint16
	Enabled   bool
	// Counts is the most passed requests a CPU counts a window while the
	// service learns (protocol version 6), up to santad's limit of
	// 100,000, its default (0). santad counts as many as the learning
	// service that asks for most: fewer cost the server less, and tell
	// less of the requests that pass.
	Counts uint32
}

// SetLearning turns a service's learning on or off (LEARN, protocol
// version 2; Counts, version 6). The caller becomes the service's
// manager. santad does not keep it across its restarts: send it again
// after reconnecting.
func (c *Client) SetLearning(service uint32, l Learning) error {
	req := &protocol.Learn{ServiceID: service, KeyOff: l.KeyOffset, ProbePort: l.ProbePort, Enable: l.Enabled, Counts: l.Counts}
	if _, err := call[*protocol.LearnReply](c, req, nil); err != nil {
		return fmt.Errorf("set learning of service %d: %w", service, err)
	}
	return nil
}

// HotRequest is a request form and how many times it passed in the
// window. The request's payload is KeyOffset bytes (any) and Key.
type HotRequest struct {
	Passes uint32
	Key    []byte
}

// HotSet is a learning service's most passed request forms of the last
// complete window, most first.
type HotSet struct {
	Window time.Duration // what the counts cover; 0 before a window ended
	// Number is the window's, one more each window santad's learner
	// steps: a later window's set has another (0 before the service's
	// first window, and from a daemon of protocol version 2 to 4, which
	// does not tell).
	Number uint32
	// CountedPPM is the share of the window's passed requests santad's
	// data plane counted, in millionths (protocol version 6; 0 from an
	// older daemon, and before the first window ended): Passes are scaled
	// up to all of them, and rest on about Passes * CountedPPM / 10^6
	// counts (the passes are smoothed over windows, the share is the
	// last window's).
	CountedPPM uint32
	Requests   []HotRequest
}

// CountedShare is the share of the window's passed requests counted, 0
// to 1: 1 when every one was, or the daemon does not tell.
func (h HotSet) CountedShare() float64 {
	if h.CountedPPM == 0 || h.CountedPPM >= 1e6 {
		return 1
	}
	return float64(h.CountedPPM) / 1e6
}

// hotRestarts is how many times Hot starts over when santad's window ends
// between two of its pages.
const hotRestarts = 3

// Hot reads a learning service's hot set (HOT, protocol version 2): at
// most max requests, or as many as fit one reply if max is 0. From a
// daemon of version 5, a set larger than one reply is read in pages, all
// of one window; from an older one, max is cut to what fits one reply.
func (c *Client) Hot(service uint32, max int) (HotSet, error) {
	if max < 0 || max > math.MaxUint32 {
		return HotSet{}, fmt.Errorf("hot requests of service %d: max is %d; it must be 0 to %d", service, max, uint32(math.MaxUint32))
	}
	req := &protocol.Hot{ServiceID: service, Max: uint32(max)}
	var set HotSet
	for restarts := 0; ; {
		r, err := call[*protocol.HotReply](c, req, nil)
		if err != nil {
			return HotSet{}, fmt.Errorf("hot requests of service %d: %w", service, err)
		}
		if req.From > 0 && r.Window != set.Number {
			// A new window's set replaced the one read so far.
			if restarts++; restarts > hotRestarts {
				return HotSet{}, fmt.Errorf("hot requests of service %d: the set changed %d times while it was read", service, restarts)
			}
			req.From, req.Max = 0, uint32(max)
			continue
		}
		if req.From == 0 {
			set = HotSet{Window: time.Duration(r.WindowMS) * time.Millisecond, Number: r.Window, CountedPPM: r.CountedPPM,
				Requests: make([]HotRequest, 0, len(r.Requests))}
		}
		for _, h := range r.Requests {
			set.Requests = append(set.Requests, HotRequest(h))
		}
		got := len(set.Requests)
		if c.version < protocol.Version5 || max == 0 || got >= max || got >= int(r.Total) || len(r.Requests) == 0 {
			return set, nil
		}
		req.From, req.Max = uint32(got), uint32(max-got)
	}
}
