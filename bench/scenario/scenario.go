// Package scenario runs the paper's offload scenarios in the rig
// (bench/rig.sh) for any UDP server whose requests and replies carry a
// 16-bit id in their first two bytes: DNS's transaction id, memcached's
// UDP request id. The server runs in the server namespace; its replies to
// every item are captured; the XDP generator (bench/gen) asks for the
// items with a chosen popularity at a sweep of offered loads and checks
// every reply against the server's own bytes; Santa takes the top n items
// over on the server's very sockets (the paper's top-N offload sweep),
// answering with the bytes the server would have sent.
package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/popularity"
	"github.com/santa-offload/santa/rule"
)

// Request is the request for item i with id in its first two bytes.
type Request func(id uint16, i int) []byte

// Config is a server under test and how to measure it.
type Config struct {
	Rig  rig.Rig
	Port uint16 // the server's UDP port, on rig.ServerIPv4
	// Request builds the requests; Items is how many items there are.
	Request Request
	Items   int
	// Popularities are the request mixes swept; Offload is the top-N sweep
	// (0: the server alone); Rates the offered loads, requests/s (0: open
	// loop); RuleCounts, if any, the rule-count sweep (Figure 4).
	Popularities []popularity.Popularity
	Offload      []int
	RuleCounts   []int
	Rates        []float64
	// LearnCost, if set, adds LearnCost's measurement to Run, for requests
	// whose key (what a rule would match) starts at LearnKeyOffset.
	LearnCost      bool
	LearnKeyOffset uint16
	Rounds         int           // interleaved rounds
	Duration       time.Duration // send time per run
	// Check, if set, vets the server's captured reply to item i (with id
	// 0) before rules are built from it.
	Check func(i int, reply []byte) error
	// Beside, if set, runs beside the generator through every Sweep and
	// AgentSweep, from the generator's opening until ctx ends, e.g. writes
	// paced on its replies (bench/memcached's GET/SET mix). An error ends
	// the sweep.
	Beside func(ctx context.Context, g *gen.Generator, pop popularity.Popularity) error
	// BesideOps, if set, is how many operations Beside has completed so
	// far (SETs acknowledged, say): each measurement then reports their
	// share of the operations served in it, which Beside may fall short of.
	BesideOps func() uint64
	// RcvBuf, if not 0, is forced on the server's sockets
	// (SO_RCVBUFFORCE), for every measurement alike.
	RcvBuf               int
	ServerCPU, ClientCPU int
}

// ClientPort is the generator's source port.
const ClientPort = 40000

// Rule answers the request for item i with reply, as the server replied
// to it with id 0: the condition is the request from byte 2 on, the reply
// its template with the request's id copied in.
func Rule(request Request, i int, reply []byte) rule.Rule {
	q := request(0, i)
	return rule.Rule{
		Condition:  rule.Condition{Offset: 2, Pattern: q[2:]},
		Processors: []rule.Processor{rule.Put(2, reply[2:]), rule.Copy(0, 2, 0)},
		ReplyLen:   uint16(len(reply)),
	}
}

func (c Config) check() error {
	if c.Items < 1 {
		return fmt.Errorf("no items")
	}
	for _, n := range c.Offload {
		if n < 0 || n > c.Items {
			return fmt.Errorf("offload %d: want 0 to %d items", n, c.Items)
		}
	}
	return nil
}
