package rig

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/bench/gen"
)

// Sample is one generator run: what it sent and got back, and what the
// client and the server CPU did meanwhile.
type Sample struct {
	Took                     time.Duration
	Sent, Replies, Good, Bad uint64
	// SendCPU is the CPU time of the sending thread.
	SendCPU time.Duration
	CPUUse
}

// CPUUse is what the client and the server CPU did during a run: busy and
// total ticks (UserHZ).
type CPUUse struct {
	ClientBusy, ClientTotal uint64
	ServerBusy, ServerTotal uint64
}

// Around runs f and reads both CPUs before and after it.
func Around(clientCPU, serverCPU int, f func() error) (CPUUse, error) {
	before, err := ticks(clientCPU, serverCPU)
	if err != nil {
		return CPUUse{}, err
	}
	if err := f(); err != nil {
		return CPUUse{}, err
	}
	after, err := ticks(clientCPU, serverCPU)
	if err != nil {
		return CPUUse{}, err
	}
	return CPUUse{ClientBusy: after.ClientBusy - before.ClientBusy, ClientTotal: after.ClientTotal - before.ClientTotal,
		ServerBusy: after.ServerBusy - before.ServerBusy, ServerTotal: after.ServerTotal - before.ServerTotal}, nil
}

// ticks are both CPUs' busy and total ticks so far.
func ticks(clientCPU, serverCPU int) (CPUUse, error) {
	var u CPUUse
	var err error
	if u.ClientBusy, u.ClientTotal, err = CPUTicks(clientCPU); err != nil {
		return u, err
	}
	u.ServerBusy, u.ServerTotal, err = CPUTicks(serverCPU)
	return u, err
}

// Measure runs g from the client namespace for d at rate (0: open loop)
// and reads the counters and both CPUs around the run.
func (r Rig) Measure(ctx context.Context, g *gen.Generator, d time.Duration, rate float64, clientCPU, serverCPU int) (Sample, error) {
	var s Sample
	c0, err := g.Counters()
	if err != nil {
		return s, err
	}
	s.CPUUse, err = Around(clientCPU, serverCPU, func() error {
		err := InNetns(r.ClientNS(), func() error {
			before := threadCPU()
			var err error
			s.Took, err = g.Run(ctx, d, rate)
			s.SendCPU = threadCPU() - before
			return err
		})
		time.Sleep(20 * time.Millisecond) // replies still in flight
		return err
	})
	if err != nil {
		return s, err
	}
	c1, err := g.Counters()
	if err != nil {
		return s, err
	}
	if c1.SendErrors != c0.SendErrors {
		return s, fmt.Errorf("%d requests could not be written", c1.SendErrors-c0.SendErrors)
	}
	s.Sent, s.Replies = c1.Sent-c0.Sent, c1.Replies-c0.Replies
	s.Good, s.Bad = c1.ReplyOK-c0.ReplyOK, c1.ReplyBad-c0.ReplyBad
	return s, nil
}

// ServerBusyPct and ClientBusyPct are each CPU's busy share during the run.
func (u CPUUse) ServerBusyPct() float64 { return pct(u.ServerBusy, u.ServerTotal) }
func (u CPUUse) ClientBusyPct() float64 { return pct(u.ClientBusy, u.ClientTotal) }

// ServerUSPer is the server CPU's busy time per n (replies, say), in µs.
func (u CPUUse) ServerUSPer(n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(u.ServerBusy) / UserHZ * 1e6 / float64(n)
}

// PerSec is n over the run's time.
func (s Sample) PerSec(n uint64) float64 { return float64(n) / s.Took.Seconds() }

func pct(busy, total uint64) float64 { return 100 * float64(busy) / float64(max(1, total)) }

// threadCPU is the calling thread's CPU time, user and system.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
