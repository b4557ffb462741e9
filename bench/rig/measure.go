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
	// Busy and total ticks (UserHZ) of the client and the server CPU.
	ClientBusy, ClientTotal uint64
	ServerBusy, ServerTotal uint64
}

// Measure runs g from the client namespace for d at rate (0: open loop)
// and reads the counters and both CPUs around the run.
func (r Rig) Measure(ctx context.Context, g *gen.Generator, d time.Duration, rate float64, clientCPU, serverCPU int) (Sample, error) {
	var s Sample
	c0, err := g.Counters()
	if err != nil {
		return s, err
	}
	cb0, ct0, err := CPUTicks(clientCPU)
	if err != nil {
		return s, err
	}
	sb0, st0, err := CPUTicks(serverCPU)
	if err != nil {
		return s, err
	}
	err = InNetns(r.ClientNS(), func() error {
		before := threadCPU()
		var err error
		s.Took, err = g.Run(ctx, d, rate)
		s.SendCPU = threadCPU() - before
		return err
	})
	if err != nil {
		return s, err
	}
	time.Sleep(20 * time.Millisecond) // replies still in flight
	cb1, ct1, err := CPUTicks(clientCPU)
	if err != nil {
		return s, err
	}
	sb1, st1, err := CPUTicks(serverCPU)
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
	s.ClientBusy, s.ClientTotal = cb1-cb0, ct1-ct0
	s.ServerBusy, s.ServerTotal = sb1-sb0, st1-st0
	return s, nil
}

// ServerBusyPct and ClientBusyPct are each CPU's busy share during the run.
func (s Sample) ServerBusyPct() float64 { return pct(s.ServerBusy, s.ServerTotal) }
func (s Sample) ClientBusyPct() float64 { return pct(s.ClientBusy, s.ClientTotal) }

// ServerUSPer is the server CPU's busy time per n (replies, say), in µs.
func (s Sample) ServerUSPer(n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(s.ServerBusy) / UserHZ * 1e6 / float64(n)
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
