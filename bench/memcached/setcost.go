package main

import (
	"context"
	"fmt"
	"os"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
)

// setLoadInFlight is the SETs in flight on the SET load's connection:
// beyond the 16 the data plane follows per connection, its SETs are held
// domain-wide (docs/memcached.md), which this measures too.
const setLoadInFlight = 64

// setSample is one run of the SET load.
type setSample struct {
	sets        float64 // per s
	serverUSPer float64 // server CPU busy µs per SET
	serverBusy  float64 // %
}

// setCost measures the write path's added cost: a closed-loop SET load
// over one TCP connection from the client namespace (setLoadInFlight SETs
// in flight, keys in turn, each its own value again) for d, memcached alone
// against memcached with the agent (santad and santa-offload memcached:
// memcached's listener and UDP socket attached and marked as one domain,
// so every SET is parsed by the sockmap verdict and bumps its key's
// generation before memcached reads it), interleaved over rounds (A B,
// then B A). The agent gets no GETs, so it holds no rules: rules are
// checked by readers, not by writers. RESULT lines are id/set_load/with=...
func setCost(ctx context.Context, c setup, a *scenario.OffloadAgent, id string, d time.Duration) error {
	got := map[bool][]setSample{}
	for round := range c.Rounds {
		for k := range 2 {
			withAgent := (round+k)%2 == 1
			s, err := setRun(ctx, c, a, withAgent, d)
			if err != nil {
				return err
			}
			got[withAgent] = append(got[withAgent], s)
			fmt.Fprintf(os.Stderr, "  %s SETs, agent %v, round %d: %.0f SETs/s, %.2f µs/SET server, busy %.1f%%\n",
				id, withAgent, round, s.sets, s.serverUSPer, s.serverBusy)
		}
	}
	var us [2]float64
	for i, withAgent := range []bool{false, true} {
		name := fmt.Sprintf("%s/set_load/with=%s", id, map[bool]string{false: "memcached", true: "agent"}[withAgent])
		dp.Summary(name+"/sets_per_s", got[withAgent], func(s setSample) float64 { return s.sets }, "sets/s")
		us[i] = dp.Summary(name+"/server_us_per_set", got[withAgent], func(s setSample) float64 { return s.serverUSPer }, "us/set")
		dp.Summary(name+"/server_cpu_busy", got[withAgent], func(s setSample) float64 { return s.serverBusy }, "%")
	}
	fmt.Printf("RESULT name=%s/set_load/added_server_us_per_set value=%.3f unit=us/set\n", id, us[1]-us[0])
	return nil
}

// setRun is one run of the SET load, with the agent started first (and
// stopped after) if withAgent: the connection is made after the agent
// marked the listener, as a client's would be.
func setRun(ctx context.Context, c setup, a *scenario.OffloadAgent, withAgent bool, d time.Duration) (s setSample, err error) {
	if withAgent {
		if err := a.Start(ctx, c.Items); err != nil {
			return s, err
		}
		defer func() {
			if serr := a.Stop(); err == nil {
				err = serr
			}
		}()
	}
	conn := &mixConn{dial: c.dialTCP}
	defer conn.close()
	var buf []byte
	next := 0
	sets := 0
	start := time.Now()
	use, err := rig.Around(c.ClientCPU, c.ServerCPU, func() error {
		for time.Since(start) < d && ctx.Err() == nil {
			buf = buf[:0]
			for range setLoadInFlight {
				buf = appendSet(buf, next)
				next = (next + 1) % c.Items
			}
			if err := conn.exchange(buf, setLoadInFlight); err != nil {
				return err
			}
			sets += setLoadInFlight
		}
		return ctx.Err()
	})
	if err != nil {
		return s, err
	}
	took := time.Since(start).Seconds()
	return setSample{sets: float64(sets) / took, serverUSPer: use.ServerUSPer(uint64(sets)), serverBusy: use.ServerBusyPct()}, nil
}
