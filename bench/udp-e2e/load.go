package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/rig"
)

// The load clients. The C client (-client c) sends bursts with sendmmsg and
// keeps a window of unanswered requests. The XDP generator (-client xdp)
// sends open loop from the client CPU, a few million requests per second,
// so the server is driven past saturation and the replies per second are
// the server's.

// A sender sends one mix for a while and reports what the C client prints:
// sent, good (replies with the expected bytes), send_ns, hz and both CPUs'
// busy and total ticks.
type sender func(dur time.Duration) (map[string]uint64, error)

// openLoad prepares the load of one mix, a set of names and how often each
// is asked for: hot (1024 names, uniform), uniform (all names) or zipf (all
// names, Zipf s=0.99). load gives its sender at an offered rate (0: as fast
// as the client goes); done releases it.
func openLoad(ctx context.Context, c config, mix string, rng *rand.Rand, tmp, clientBin, cliNS, cliDev string,
	size int) (load func(rate float64) sender, done func(), err error) {
	var picked []int
	pop := gen.Uniform
	switch mix {
	case "hot":
		picked = rng.Perm(c.nrules)[:min(1024, c.nrules)]
	case "uniform":
		picked = rng.Perm(c.nrules)
	case "zipf":
		picked, pop = rng.Perm(c.nrules), gen.Popularity{Zipf: true, S: 0.99}
	default:
		return nil, nil, fmt.Errorf("unknown mix %q", mix)
	}
	if c.client == "xdp" {
		g, err := openGen(cliNS, cliDev, picked, pop, size)
		if err != nil {
			return nil, nil, err
		}
		load := func(rate float64) sender {
			return func(dur time.Duration) (map[string]uint64, error) { return runGen(ctx, g, cliNS, c, dur, rate) }
		}
		return load, func() { g.Close() }, nil
	}
	// The C client replays a file of draws.
	var picks []int
	for _, i := range pop.Sequence(len(picked), 1<<18, rng.Uint64()) {
		picks = append(picks, picked[i])
	}
	reqFile := filepath.Join(tmp, fmt.Sprintf("req-%s-%d.bin", mix, size))
	if err := writeRequests(reqFile, picks, dp.Name); err != nil {
		return nil, nil, err
	}
	send := func(dur time.Duration) (map[string]uint64, error) {
		return runClient(ctx, clientBin, cliNS, reqFile, size, c, dur)
	}
	return func(float64) sender { return send }, func() { os.Remove(reqFile) }, nil
}

// genPort is the generator's source port: its replies come back to it,
// where gen_count counts them.
const genPort = 40000

// openGen loads the generator on the client veth with one request per
// picked name (transaction id = its index) and the replies expected to
// them, sent in the order pop draws.
func openGen(cliNS, cliDev string, picked []int, pop gen.Popularity, size int) (*gen.Generator, error) {
	payloads := make([][]byte, len(picked))
	expected := make([][]byte, len(picked))
	for i, n := range picked {
		txid := uint16(i)
		payloads[i] = dp.DNSQuery(txid, dp.Name(n))
		reply, err := dp.DNSReply(dp.Name(n), size)
		if err != nil {
			return nil, err
		}
		reply[0], reply[1] = byte(txid>>8), byte(txid)
		expected[i] = reply
	}
	ends := gen.Endpoints{SrcMAC: rig.ClientMAC, DstMAC: rig.ServerMAC,
		Src: netip.AddrPortFrom(netip.MustParseAddr(rig.ClientIPv4), genPort),
		Dst: netip.AddrPortFrom(netip.MustParseAddr(rig.ServerIPv4), port)}
	var g *gen.Generator
	err := rig.OnDev(cliNS, cliDev, func(ifindex int) error {
		var err error
		g, err = gen.Open(gen.Config{Ifindex: ifindex, Requests: gen.UDPFrames(ends, payloads),
			ReplyPort: genPort, Expected: expected, Popularity: pop, Seed: 7})
		return err
	})
	return g, err
}

// runGen sends for dur at rate and reports as a sender.
func runGen(ctx context.Context, g *gen.Generator, cliNS string, c config, dur time.Duration, rate float64) (map[string]uint64, error) {
	before, err := g.Counters()
	if err != nil {
		return nil, err
	}
	cpus := []int{c.clientCPU, c.serverCPU}
	busy0, total0 := make([]uint64, 2), make([]uint64, 2)
	for i, cpu := range cpus {
		if busy0[i], total0[i], err = rig.CPUTicks(cpu); err != nil {
			return nil, err
		}
	}
	var took time.Duration
	if err := rig.InNetns(cliNS, func() error {
		var err error
		took, err = g.Run(ctx, dur, rate)
		return err
	}); err != nil {
		return nil, err
	}
	time.Sleep(20 * time.Millisecond) // replies still in flight
	out := map[string]uint64{"send_ns": uint64(took.Nanoseconds()), "hz": rig.UserHZ}
	for i, cpu := range cpus {
		busy, total, err := rig.CPUTicks(cpu)
		if err != nil {
			return nil, err
		}
		out[fmt.Sprintf("cpu%d_busy", cpu)] = busy - busy0[i]
		out[fmt.Sprintf("cpu%d_total", cpu)] = total - total0[i]
	}
	after, err := g.Counters()
	if err != nil {
		return nil, err
	}
	out["sent"] = after.Sent - before.Sent
	out["replies"] = after.Replies - before.Replies
	out["good"] = after.ReplyOK - before.ReplyOK
	out["bad"] = after.ReplyBad - before.ReplyBad
	return out, nil
}
