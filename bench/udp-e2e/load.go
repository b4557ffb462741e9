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
			return func(dur time.Duration) (map[string]uint64, error) {
				return runGen(ctx, g, rig.Rig{Name: c.rig}, c, dur, rate)
			}
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
func runGen(ctx context.Context, g *gen.Generator, r rig.Rig, c config, dur time.Duration, rate float64) (map[string]uint64, error) {
	m, err := r.Measure(ctx, g, dur, rate, c.clientCPU, c.serverCPU)
	if err != nil {
		return nil, err
	}
	return map[string]uint64{
		"send_ns": uint64(m.Took.Nanoseconds()), "hz": rig.UserHZ,
		"sent": m.Sent, "replies": m.Replies, "good": m.Good, "bad": m.Bad,
		fmt.Sprintf("cpu%d_busy", c.clientCPU): m.ClientBusy, fmt.Sprintf("cpu%d_total", c.clientCPU): m.ClientTotal,
		fmt.Sprintf("cpu%d_busy", c.serverCPU): m.ServerBusy, fmt.Sprintf("cpu%d_total", c.serverCPU): m.ServerTotal,
	}, nil
}
