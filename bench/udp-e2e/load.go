package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/popularity"
)

// The load clients. The C client (-client c) sends bursts with sendmmsg and
// keeps a window of unanswered requests. The XDP generator (-client xdp)
// sends open loop from the client CPU, a few million requests per second,
// so the server is driven past saturation and the replies per second are
// the server's.

// A sender sends one mix for a while and reports the run.
type sender func(dur time.Duration) (loadRun, error)

// loadRun is a load client's run: what it sent and got back, both CPUs'
// ticks meanwhile, and (the C client) how often its window was full.
type loadRun struct {
	rig.Sample
	stalls uint64
}

// openLoad prepares the load of one mix, a set of names and how often each
// is asked for: hot (1024 names, uniform), uniform (all names) or zipf (all
// names, Zipf s=0.99). load gives its sender at an offered rate (0: as fast
// as the client goes); done releases it.
func openLoad(ctx context.Context, c config, mix string, rng *rand.Rand, tmp, clientBin string,
	size int) (load func(rate float64) sender, done func(), err error) {
	var picked []int
	pop := popularity.Uniform
	switch mix {
	case "hot":
		picked = rng.Perm(c.nrules)[:min(1024, c.nrules)]
	case "uniform":
		picked = rng.Perm(c.nrules)
	case "zipf":
		picked, pop = rng.Perm(c.nrules), popularity.Popularity{Zipf: true, S: 0.99}
	default:
		return nil, nil, fmt.Errorf("unknown mix %q", mix)
	}
	if c.client == "xdp" {
		g, err := openGen(c.r, picked, pop, size)
		if err != nil {
			return nil, nil, err
		}
		load := func(rate float64) sender {
			return func(dur time.Duration) (loadRun, error) {
				m, err := c.r.Measure(ctx, g, dur, rate, c.clientCPU, c.serverCPU)
				return loadRun{Sample: m}, err
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
	if err := writeRequests(reqFile, picks, pkttest.Name); err != nil {
		return nil, nil, err
	}
	send := func(dur time.Duration) (loadRun, error) {
		return runClient(ctx, clientBin, c.r.ClientNS(), reqFile, size, c, dur)
	}
	return func(float64) sender { return send }, func() { os.Remove(reqFile) }, nil
}

// genPort is the generator's source port: its replies come back to it,
// where gen_count counts them.
const genPort = 40000

// openGen loads the generator on the client veth with one request per
// picked name (transaction id = its index) and the replies expected to
// them, sent in the order pop draws.
func openGen(r rig.Rig, picked []int, pop popularity.Popularity, size int) (*gen.Generator, error) {
	payloads := make([][]byte, len(picked))
	expected := make([][]byte, len(picked))
	for i, n := range picked {
		txid := uint16(i)
		payloads[i] = pkttest.DNSQuery(txid, pkttest.Name(n))
		reply, err := pkttest.SizedDNSReply(pkttest.Name(n), size)
		if err != nil {
			return nil, err
		}
		reply[0], reply[1] = byte(txid>>8), byte(txid)
		expected[i] = reply
	}
	return r.OpenGenerator(gen.Config{Requests: rig.Requests(genPort, port, payloads), ReplyPort: genPort,
		Expected: expected, Popularity: pop, Seed: 7})
}
