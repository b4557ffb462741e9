package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/popularity"
	"github.com/santa-offload/santa/internal/udpask"
	"github.com/santa-offload/santa/rule"
)

// Bench is a running server under test: copies of its sockets, its
// replies to every item, and Santa ready to take items over.
type Bench struct {
	c       Config
	fds     []int
	replies [][]byte
	o       *offloader
	// peaks are the last Sweep's peak replies/s per offload level, by
	// popularity: what AgentSweep compares an agent with.
	peaks map[popularity.Popularity]map[int]float64
}

// Open takes the server's sockets (the server must be serving on
// c.Port), captures its reply to every item and registers the sockets
// with a data plane of its own, not yet attached: until a sweep offloads
// items the server answers alone.
func Open(c Config) (*Bench, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	b := &Bench{c: c, peaks: map[popularity.Popularity]map[int]float64{}}
	var err error
	b.fds, err = sockets(netns.Named(c.Rig.ServerNS()), netip.MustParseAddr(rig.ServerIPv4), c.Port)
	if err != nil {
		return nil, err
	}
	if c.RcvBuf > 0 {
		for _, fd := range b.fds {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, c.RcvBuf); err != nil {
				b.Close()
				return nil, fmt.Errorf("raising the server's receive buffer: %w", err)
			}
		}
	}
	conn, err := c.Rig.Dial("udp", int(c.Port))
	if err != nil {
		b.Close()
		return nil, err
	}
	defer conn.Close()
	all := make([]int, c.Items)
	for i := range all {
		all[i] = i
	}
	if b.replies, err = udpask.Replies(conn, c.Request, all); err != nil {
		b.Close()
		return nil, fmt.Errorf("capturing the server's replies: %w", err)
	}
	if c.Check != nil {
		for i, r := range b.replies {
			if err := c.Check(i, r); err != nil {
				b.Close()
				return nil, err
			}
		}
	}
	rule := func(i int) rule.Rule { return Rule(c.Request, i, b.replies[i]) }
	if b.o, err = newOffloader(c.Rig, b.fds, c.Items, rule); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Sockets is how many sockets the server answers on.
func (b *Bench) Sockets() int { return len(b.fds) }

// Close detaches Santa and lets the sockets go (the server keeps its own).
func (b *Bench) Close() {
	if b.o != nil {
		b.o.close()
	}
	closeAll(b.fds)
}

// sample is one run of a sweep.
type sample struct {
	replies, received float64 // per s: good replies, all replies at the client
	serverUSPer       float64 // server CPU busy µs per good reply
	serverBusy        float64 // %
	bySanta           float64 // % of the served replies
	// With Config.BesideOps: % of the operations served (the replies and
	// Beside's) that were Beside's.
	beside    float64
	hasBeside bool
}

// Run is the whole scenario: a sweep for each popularity, then the rule
// counts, then the cost of learning. RESULT lines are named
// id/popularity=P/..., id/rules=K/... and id/popularity=P/learn=C/....
func (b *Bench) Run(ctx context.Context, id string) error {
	for _, pop := range b.c.Popularities {
		if err := b.Sweep(ctx, id+"/popularity="+pop.String(), pop); err != nil {
			return err
		}
	}
	if len(b.c.RuleCounts) > 0 {
		if err := b.RuleCounts(ctx, id, b.c.RuleCounts); err != nil {
			return err
		}
	}
	if b.c.LearnCost {
		return b.LearnCost(ctx, id+"/popularity="+b.c.Popularities[0].String(), b.c.Popularities[0], b.c.LearnKeyOffset)
	}
	return nil
}

// Sweep measures every offered load of c.Rates with the items asked for
// with popularity pop (item 0 the most popular); within a load, rounds
// interleave the offload levels (order reversed every other round). It
// prints RESULT lines named id/offload=N/rate=R/..., and per offload
// level the peak over the loads and its ratio to the server alone.
func (b *Bench) Sweep(ctx context.Context, id string, pop popularity.Popularity) (err error) {
	c := b.c
	g, done, err := b.sweepGenerator(ctx, pop)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, done()) }()
	peak := map[int]float64{}
	for _, rate := range c.Rates {
		got := map[int][]sample{}
		for round := range c.Rounds {
			order := slices.Clone(c.Offload)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, n := range order {
				s, err := b.run(ctx, g, n, rate)
				if err != nil {
					return err
				}
				got[n] = append(got[n], s)
				fmt.Fprintf(os.Stderr, "  %s rate=%s offload=%d round %d: %s\n", id, gen.RateName(rate), n, round, s)
			}
		}
		for _, n := range c.Offload {
			med := summary(fmt.Sprintf("%s/offload=%d/rate=%s", id, n, gen.RateName(rate)), got[n])
			peak[n] = max(peak[n], med)
		}
	}
	b.peaks[pop] = peak
	for _, n := range c.Offload {
		fmt.Printf("RESULT name=%s/offload=%d/peak_replies_per_s value=%.3f unit=replies/s\n", id, n, peak[n])
		if peak[0] > 0 && n > 0 {
			fmt.Printf("RESULT name=%s/offload=%d/peak_vs_server_alone value=%.3f unit=ratio\n", id, n, peak[n]/peak[0])
		}
	}
	return nil
}

// RuleCounts is the paper's Figure 4: for each count k, Santa answers
// every request from k rules (the first k items, asked for uniformly),
// open loop, c.Rounds runs. RESULT lines are named id/rules=K/....
func (b *Bench) RuleCounts(ctx context.Context, id string, counts []int) error {
	for _, k := range counts {
		if k < 1 || k > b.c.Items {
			return fmt.Errorf("rule count %d: want 1 to %d", k, b.c.Items)
		}
		g, err := b.openGenerator(k, popularity.Uniform)
		if err != nil {
			return err
		}
		var got []sample
		for round := range b.c.Rounds {
			s, err := b.run(ctx, g, k, 0)
			if err != nil {
				g.Close()
				return err
			}
			got = append(got, s)
			fmt.Fprintf(os.Stderr, "  %s rules=%d round %d: %s\n", id, k, round, s)
		}
		g.Close()
		summary(fmt.Sprintf("%s/rules=%d", id, k), got)
	}
	return nil
}

// summary prints a configuration's RESULT lines and returns its median
// replies/s.
func summary(name string, got []sample) float64 {
	med := dp.Summary(name+"/replies_per_s", got, func(s sample) float64 { return s.replies }, "replies/s")
	dp.Summary(name+"/server_us_per_reply", got, func(s sample) float64 { return s.serverUSPer }, "us/reply")
	dp.Summary(name+"/server_cpu_busy", got, func(s sample) float64 { return s.serverBusy }, "%")
	dp.Summary(name+"/answered_by_santa", got, func(s sample) float64 { return s.bySanta }, "%")
	if len(got) > 0 && got[0].hasBeside {
		dp.Summary(name+"/beside_share", got, func(s sample) float64 { return s.beside }, "%")
	}
	return med
}

func (s sample) String() string {
	line := fmt.Sprintf("%8.0f replies/s (of %8.0f, %5.1f%% by Santa), %6.2f µs/reply server, busy %5.1f%%",
		s.replies, s.received, s.bySanta, s.serverUSPer, s.serverBusy)
	if s.hasBeside {
		line += fmt.Sprintf(", %4.2f%% beside", s.beside)
	}
	return line
}

// openGenerator loads the generator with the request for each of the
// first n items (item i with id i mod 2^16) in popularity order, and the
// server's replies to them as the expected bytes.
func (b *Bench) openGenerator(n int, pop popularity.Popularity) (*gen.Generator, error) {
	payloads := make([][]byte, n)
	expected := make([][]byte, n)
	for i := range payloads {
		payloads[i] = b.c.Request(uint16(i), i)
		expected[i] = append([]byte{byte(i >> 8), byte(i)}, b.replies[i][2:]...)
	}
	return b.c.Rig.OpenGenerator(gen.Config{Requests: rig.Requests(ClientPort, b.c.Port, payloads),
		ReplyPort: ClientPort, Expected: expected, Popularity: pop, Seed: 1})
}

// sweepGenerator opens the generator of a sweep over every item with
// popularity pop and starts c.Beside beside it; done stops Beside, closes
// the generator and returns Beside's error.
func (b *Bench) sweepGenerator(ctx context.Context, pop popularity.Popularity) (g *gen.Generator, done func() error, err error) {
	if g, err = b.openGenerator(b.c.Items, pop); err != nil {
		return nil, nil, err
	}
	if b.c.Beside == nil {
		return g, g.Close, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	beside := make(chan error, 1)
	go func() { beside <- b.c.Beside(ctx, g, pop) }()
	return g, func() error {
		cancel()
		err := <-beside
		g.Close()
		return err
	}, nil
}

// run offloads the top n items and measures one run at rate.
func (b *Bench) run(ctx context.Context, g *gen.Generator, n int, rate float64) (sample, error) {
	if err := ctx.Err(); err != nil {
		return sample{}, err
	}
	if err := b.o.set(n); err != nil {
		return sample{}, err
	}
	return b.measure(ctx, g, b.c.Duration, rate, b.o.answered)
}

// measure runs g for d at rate; answered is how many requests Santa has
// answered so far. A reply that differs from the server's own is an error.
func (b *Bench) measure(ctx context.Context, g *gen.Generator, d time.Duration, rate float64,
	answered func() (uint64, error)) (sample, error) {
	before, err := answered()
	if err != nil {
		return sample{}, err
	}
	opsBefore := b.besideOps()
	m, err := b.c.Rig.Measure(ctx, g, d, rate, b.c.ClientCPU, b.c.ServerCPU)
	if err != nil {
		return sample{}, err
	}
	ops := b.besideOps() - opsBefore
	after, err := answered()
	if err != nil {
		return sample{}, err
	}
	if m.Bad > 0 {
		return sample{}, fmt.Errorf("%d replies differ from the server's own bytes", m.Bad)
	}
	s := sample{replies: m.PerSec(m.Good), received: m.PerSec(m.Replies), serverUSPer: m.ServerUSPer(m.Good),
		serverBusy: m.ServerBusyPct()}
	if m.Replies > 0 {
		s.bySanta = 100 * float64(after-before) / float64(m.Replies)
	}
	if b.c.BesideOps != nil && ops+m.Good > 0 {
		s.beside, s.hasBeside = 100*float64(ops)/float64(ops+m.Good), true
	}
	return s, nil
}

// besideOps is BesideOps' count, 0 without it.
func (b *Bench) besideOps() uint64 {
	if b.c.BesideOps == nil {
		return 0
	}
	return b.c.BesideOps()
}
