package scenario

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/internal/popularity"
)

// Agent is an offload agent under test. Unlike the sweeps, where the bench
// installs the true top N (the oracle), an agent chooses what to offload
// itself, from the traffic, with a data plane of its own on the server's
// interface.
type Agent interface {
	// Start starts the agent offloading at most n items, with no rules,
	// and returns once it manages every socket of the server.
	Start(ctx context.Context, n int) error
	// Offloaded is how many requests the agent's data plane has answered
	// so far, and how many items it offloads now.
	Offloaded() (answered uint64, items int, err error)
	// Stop stops the agent and takes its data plane off the interface.
	Stop() error
}

// AgentConfig is how AgentSweep measures an agent.
type AgentConfig struct {
	// Levels are the agent's limits: at most N items offloaded.
	Levels []int
	// Converge is how long traffic runs at Rate (0: open loop) from the
	// agent's start, in 1 s slices, before the offered loads are
	// measured.
	Converge time.Duration
	Rate     float64
	// Target is the share of the oracle's replies/s whose first slice is
	// reported (0.9: seconds_to_90pct_of_oracle).
	Target float64
}

// Client is a second client, run against whatever answers at the time
// (dnsperf, a socket client, in bench/dns).
type Client struct {
	Name string
	Run  func(ctx context.Context, pop popularity.Popularity) (ClientSample, error)
}

// ClientSample is one run of a Client.
type ClientSample struct {
	Replies     float64 // per s
	ServerUSPer float64 // server CPU busy µs per reply
	ServerBusy  float64 // %
}

// slice is one second of traffic while an agent converges.
type slice struct {
	at    float64 // s from the start of traffic to the end of the slice
	s     sample
	items int // offloaded at the end
}

// agentRuns are one level's measurements over the rounds.
type agentRuns struct {
	oracle  []sample
	series  [][]slice // per round
	reached []float64 // per round: s until Target (+Inf: not within Converge)
	steady  map[float64][]sample
}

// AgentSweep measures agent a at each level of ac, the items asked for
// with popularity pop. In each round (levels in alternating order), for
// each level N: the oracle's top N at ac.Rate, the reference; then the
// agent starts with no rules, and traffic at ac.Rate is measured in 1 s
// slices for ac.Converge; then each offered load of c.Rates, the agent
// still running. The client, if any, measures the server alone once a
// round, and the oracle and the agent at each level; with no levels (and
// no agent), only the server alone. RESULT lines are
// named id/agent=N/..., and the client's id/offload=N/client=NAME/...
// and id/agent=N/client=NAME/....
func (b *Bench) AgentSweep(ctx context.Context, id string, pop popularity.Popularity, a Agent, ac AgentConfig, cl *Client) (err error) {
	g, done, err := b.sweepGenerator(ctx, pop)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, done()) }()
	runs := map[int]*agentRuns{}
	for _, n := range ac.Levels {
		runs[n] = &agentRuns{steady: map[float64][]sample{}}
	}
	clients := map[string][]ClientSample{}
	var keys []string // of clients, in the order first measured
	client := func(key string) error {
		if cl == nil {
			return nil
		}
		s, err := cl.Run(ctx, pop)
		if err == nil {
			if clients[key] == nil {
				keys = append(keys, key)
			}
			clients[key] = append(clients[key], s)
		}
		return err
	}
	for round := range b.c.Rounds {
		if err := b.o.set(0); err != nil {
			return err
		}
		if err := client("offload=0"); err != nil {
			return err
		}
		order := slices.Clone(ac.Levels)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range order {
			r := runs[n]
			oracle, err := b.run(ctx, g, n, ac.Rate)
			if err != nil {
				return err
			}
			r.oracle = append(r.oracle, oracle)
			fmt.Fprintf(os.Stderr, "  %s oracle top %d, round %d: %s\n", id, n, round, oracle)
			if err := client(fmt.Sprintf("offload=%d", n)); err != nil {
				return err
			}
			if err := b.o.set(0); err != nil {
				return err
			}
			if err := b.agentRound(ctx, fmt.Sprintf("%s agent %d round %d", id, n, round), g, a, ac, n, r, oracle.replies,
				func() error { return client(fmt.Sprintf("agent=%d", n)) }); err != nil {
				return err
			}
		}
	}
	for _, n := range ac.Levels {
		b.agentSummary(fmt.Sprintf("%s/agent=%d", id, n), runs[n], ac, b.peaks[pop], n)
	}
	for _, key := range keys {
		got := clients[key]
		name := fmt.Sprintf("%s/%s/client=%s", id, key, cl.Name)
		dp.Summary(name+"/replies_per_s", got, func(s ClientSample) float64 { return s.Replies }, "replies/s")
		dp.Summary(name+"/server_us_per_reply", got, func(s ClientSample) float64 { return s.ServerUSPer }, "us/reply")
		dp.Summary(name+"/server_cpu_busy", got, func(s ClientSample) float64 { return s.ServerBusy }, "%")
	}
	return nil
}

// agentRound is one run of the agent at level n: started with no rules,
// converging under traffic, then at each offered load, then the client;
// stopped whatever happens.
func (b *Bench) agentRound(ctx context.Context, what string, g *gen.Generator, a Agent, ac AgentConfig, n int,
	r *agentRuns, oracle float64, client func() error) (err error) {
	if err := a.Start(ctx, n); err != nil {
		return err
	}
	defer func() {
		if serr := a.Stop(); err == nil {
			err = serr
		}
	}()
	answered := func() (uint64, error) {
		n, _, err := a.Offloaded()
		return n, err
	}
	series := make([]slice, 0, int(ac.Converge/time.Second))
	reached := math.Inf(1)
	start := time.Now()
	for range cap(series) {
		s, err := b.measure(ctx, g, time.Second, ac.Rate, answered)
		if err != nil {
			return err
		}
		_, items, err := a.Offloaded()
		if err != nil {
			return err
		}
		at := time.Since(start).Seconds()
		series = append(series, slice{at: at, s: s, items: items})
		if math.IsInf(reached, 1) && s.replies >= ac.Target*oracle {
			reached = at
		}
		fmt.Fprintf(os.Stderr, "  %s, %5.1f s: %s, %d items\n", what, at, s, items)
	}
	r.series = append(r.series, series)
	r.reached = append(r.reached, reached)
	fmt.Fprintf(os.Stderr, "  %s: %.0f%% of the oracle's %.0f replies/s after %.1f s\n", what, 100*ac.Target, oracle, reached)
	for _, rate := range b.c.Rates {
		s, err := b.measure(ctx, g, b.c.Duration, rate, answered)
		if err != nil {
			return err
		}
		r.steady[rate] = append(r.steady[rate], s)
		fmt.Fprintf(os.Stderr, "  %s rate=%s: %s\n", what, gen.RateName(rate), s)
	}
	return client()
}

// agentSummary prints one level's RESULT lines: the oracle's reference,
// the per-second series (each second's median over the rounds), the time
// until the target, the offered loads and the peak, against the sweep's
// peaks if it measured them.
func (b *Bench) agentSummary(name string, r *agentRuns, ac AgentConfig, peaks map[int]float64, n int) {
	dp.Summary(name+"/oracle_replies_per_s", r.oracle, func(s sample) float64 { return s.replies }, "replies/s")
	for k := range len(r.series[0]) {
		at := make([]slice, len(r.series))
		for round, series := range r.series {
			at[round] = series[k]
		}
		sec := fmt.Sprintf("%s/second=%d", name, k+1)
		dp.Summary(sec+"/replies_per_s", at, func(s slice) float64 { return s.s.replies }, "replies/s")
		dp.Summary(sec+"/answered_by_santa", at, func(s slice) float64 { return s.s.bySanta }, "%")
		dp.Summary(sec+"/items", at, func(s slice) float64 { return float64(s.items) }, "items")
	}
	dp.Summary(fmt.Sprintf("%s/seconds_to_%gpct_of_oracle", name, 100*ac.Target), r.reached,
		func(s float64) float64 { return s }, "s")
	peak := 0.0
	for _, rate := range b.c.Rates {
		peak = max(peak, summary(fmt.Sprintf("%s/rate=%s", name, gen.RateName(rate)), r.steady[rate]))
	}
	fmt.Printf("RESULT name=%s/peak_replies_per_s value=%.3f unit=replies/s\n", name, peak)
	if peaks[n] > 0 {
		fmt.Printf("RESULT name=%s/peak_vs_oracle value=%.3f unit=ratio\n", name, peak/peaks[n])
	}
	if peaks[0] > 0 {
		fmt.Printf("RESULT name=%s/peak_vs_server_alone value=%.3f unit=ratio\n", name, peak/peaks[0])
	}
}
