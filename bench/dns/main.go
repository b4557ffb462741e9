// Command dns is the paper's DNS scenario in the rig (bench/rig.sh): BIND 9,
// Knot and NSD from Debian's packages serve a zone of -names names from
// the server namespace, one worker each, pinned to the server CPU. The XDP
// generator (bench/gen) asks for the names with uniform or Zipf popularity
// at a sweep of offered loads; every reply is counted and checked against
// the server's own reply bytes. Santa then takes over the top n names
// (the paper's top-N offload sweep) on the server's very socket, taken from
// the running server with pidfd_getfd: its rules answer with the bytes the
// server would have sent. Offload levels are interleaved within each round;
// offload 0 is the server alone (Santa detached). dnsperf, the classic
// client, measures each server alone as well, for comparison with
// published figures.
//
// Needs root and the packages bind9, knot, nsd, dnsperf (make bench-deps).
// Everything it starts or creates is removed on exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/netns"
)

type config struct {
	r                    rig.Rig
	servers              []string
	names                int
	pops                 []gen.Popularity
	offload              []int // names offloaded; names itself for "all"
	rates                []float64
	rounds               int
	duration             time.Duration
	dnsperf              time.Duration
	rcvbuf               int
	serverCPU, clientCPU int
}

func main() {
	c, err := parseFlags()
	if err == nil {
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dns:", err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	var c config
	var srv, pops, offload, rates string
	flag.StringVar(&c.r.Name, "rig", "sbdns", "rig name (namespaces NAME-srv, NAME-cli)")
	flag.StringVar(&c.r.Script, "rig-script", "bench/rig.sh", "path of rig.sh")
	flag.StringVar(&srv, "servers", "bind,knot,nsd", "servers: bind, knot, nsd")
	flag.IntVar(&c.names, "names", 1000, "names in the zone")
	flag.StringVar(&pops, "popularity", "uniform,zipf:1", "popularities: uniform, zipf:S")
	flag.StringVar(&offload, "offload", "0,100,all", "top-N offload sweep: names answered by Santa (all: every name)")
	flag.StringVar(&rates, "rates", "50000,100000,150000,200000,300000,1000000,0", "offered loads, requests/s (0: open loop)")
	flag.IntVar(&c.rounds, "rounds", 3, "interleaved rounds")
	flag.DurationVar(&c.duration, "duration", time.Second, "send time per run")
	flag.DurationVar(&c.dnsperf, "dnsperf", 10*time.Second, "dnsperf run per server (0: none)")
	flag.IntVar(&c.rcvbuf, "rcvbuf", 4<<20, "the servers' socket receive buffer, bytes (0: their own)")
	flag.IntVar(&c.serverCPU, "server-cpu", 1, "server CPU (server, server veth NAPI)")
	flag.IntVar(&c.clientCPU, "client-cpu", 0, "client CPU (generator, dnsperf, client veth NAPI)")
	flag.Parse()
	c.servers = strings.Split(srv, ",")
	for _, s := range c.servers {
		if _, ok := servers[s]; !ok {
			return c, fmt.Errorf("-servers: unknown server %q", s)
		}
	}
	if c.names < 1 || c.names > 1<<20 {
		return c, fmt.Errorf("-names %d: want 1 to %d", c.names, 1<<20)
	}
	for _, p := range strings.Split(pops, ",") {
		pop, err := gen.ParsePopularity(p)
		if err != nil {
			return c, err
		}
		c.pops = append(c.pops, pop)
	}
	for _, o := range strings.Split(offload, ",") {
		n, err := strconv.Atoi(o)
		if o == "all" {
			n, err = c.names, nil
		}
		if err != nil || n < 0 || n > c.names {
			return c, fmt.Errorf("-offload: %q is not 0 to %d or all", o, c.names)
		}
		c.offload = append(c.offload, n)
	}
	for _, r := range strings.Split(rates, ",") {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v < 0 {
			return c, fmt.Errorf("-rates: %q is not a rate", r)
		}
		c.rates = append(c.rates, v)
	}
	return c, nil
}

func run(c config) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp("", "santa-dns-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	idle, err := c.r.Start(c.serverCPU, c.clientCPU)
	if err != nil {
		return err
	}
	defer c.r.Stop(&err)
	fmt.Printf("RESULT name=dns/idle_server_cpu_busy value=%.3f unit=%%\n", idle)
	for _, s := range c.servers {
		if err := runServer(ctx, c, servers[s], tmp); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// runServer starts one server, measures it with dnsperf, then runs the
// generator's sweep over popularity x offered load x offload level.
func runServer(ctx context.Context, c config, s server, tmp string) error {
	dir, err := os.MkdirTemp(tmp, s.name+"-")
	if err != nil {
		return err
	}
	if err := writeZone(dir+"/zone", c.names, rig.ServerIPv4); err != nil {
		return err
	}
	var conn *net.UDPConn
	if err := rig.InNetns(c.r.ClientNS(), func() error {
		var err error
		conn, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(rig.ServerIPv4), Port: 53})
		return err
	}); err != nil {
		return err
	}
	defer conn.Close()
	t0 := time.Now()
	srv, err := start(s, dir, c.r.ServerNS(), rig.ServerIPv4, c.serverCPU, func() error {
		_, err := captureReplies(conn, []int{c.names - 1})
		return err
	})
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(os.Stderr, "%s: serving %d names (ready in %v)\n", s.name, c.names, time.Since(t0).Round(time.Millisecond))
	// The server's own sockets: Santa attaches its rules to them, and their
	// receive buffer is raised for every measurement alike.
	fds, err := serverSockets(netns.Named(c.r.ServerNS()), netip.MustParseAddr(rig.ServerIPv4), 53)
	if err != nil {
		return err
	}
	defer closeAll(fds)
	if c.rcvbuf > 0 {
		for _, fd := range fds {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, c.rcvbuf); err != nil {
				return fmt.Errorf("raising the server's receive buffer: %w", err)
			}
		}
	}
	id := fmt.Sprintf("dns/server=%s/names=%s", s.name, dp.Human(c.names))

	if c.dnsperf > 0 {
		if err := runDnsperf(ctx, c, id, dir); err != nil {
			return err
		}
	}
	all := make([]int, c.names)
	for i := range all {
		all[i] = i
	}
	replies, err := captureReplies(conn, all)
	if err != nil {
		return fmt.Errorf("capturing the server's replies: %w", err)
	}
	o, err := newOffloader(c, fds, replies)
	if err != nil {
		return err
	}
	defer o.close()
	for _, pop := range c.pops {
		if err := sweep(ctx, c, id+"/popularity="+pop.String(), pop, replies, o); err != nil {
			return err
		}
	}
	return nil
}

type sample struct {
	replies, received float64 // per s: good replies, all replies at the client
	serverUSPer       float64 // server CPU busy µs per good reply
	serverBusy        float64 // %
	bySanta           float64 // % of the served replies
}

// sweep measures every offered load; within a load, rounds interleave the
// offload levels (order reversed every other round).
func sweep(ctx context.Context, c config, id string, pop gen.Popularity, replies [][]byte, o *offloader) error {
	g, err := openGenerator(c, pop, replies)
	if err != nil {
		return err
	}
	defer g.Close()
	peak := map[int]float64{}
	for _, rate := range c.rates {
		got := map[int][]sample{}
		for round := range c.rounds {
			order := slices.Clone(c.offload)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, n := range order {
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := o.set(n); err != nil {
					return err
				}
				s, err := measure(ctx, c, g, o, rate)
				if err != nil {
					return err
				}
				got[n] = append(got[n], s)
				fmt.Fprintf(os.Stderr, "  %s rate=%s offload=%d round %d: %8.0f replies/s (of %8.0f, %5.1f%% by Santa), %6.2f µs/reply server, busy %5.1f%%\n",
					id, gen.RateName(rate), n, round, s.replies, s.received, s.bySanta, s.serverUSPer, s.serverBusy)
			}
		}
		for _, n := range c.offload {
			name := fmt.Sprintf("%s/offload=%d/rate=%s", id, n, gen.RateName(rate))
			med := dp.Summary(name+"/replies_per_s", got[n], func(s sample) float64 { return s.replies }, "replies/s")
			dp.Summary(name+"/server_us_per_reply", got[n], func(s sample) float64 { return s.serverUSPer }, "us/reply")
			dp.Summary(name+"/server_cpu_busy", got[n], func(s sample) float64 { return s.serverBusy }, "%")
			dp.Summary(name+"/answered_by_santa", got[n], func(s sample) float64 { return s.bySanta }, "%")
			peak[n] = max(peak[n], med)
		}
	}
	for _, n := range c.offload {
		fmt.Printf("RESULT name=%s/offload=%d/peak_replies_per_s value=%.3f unit=replies/s\n", id, n, peak[n])
		if peak[0] > 0 && n > 0 {
			fmt.Printf("RESULT name=%s/offload=%d/peak_vs_server_alone value=%.3f unit=ratio\n", id, n, peak[n]/peak[0])
		}
	}
	return nil
}

// openGenerator loads the generator with a query for every name (name i
// has transaction id i mod 2^16) in popularity order, name 0 the most
// popular, and the server's replies to them as the expected bytes.
func openGenerator(c config, pop gen.Popularity, replies [][]byte) (*gen.Generator, error) {
	payloads := make([][]byte, c.names)
	expected := make([][]byte, c.names)
	for i := range payloads {
		payloads[i] = query(uint16(i), i)
		expected[i] = append([]byte{byte(i >> 8), byte(i)}, replies[i][2:]...)
	}
	return c.r.OpenGenerator(gen.Config{Requests: rig.Requests(clientPort, 53, payloads), ReplyPort: clientPort,
		Expected: expected, Popularity: pop, Seed: 1})
}

// clientPort is the generator's source port.
const clientPort = 40053

func measure(ctx context.Context, c config, g *gen.Generator, o *offloader, rate float64) (sample, error) {
	before, err := o.answered()
	if err != nil {
		return sample{}, err
	}
	m, err := c.r.Measure(ctx, g, c.duration, rate, c.clientCPU, c.serverCPU)
	if err != nil {
		return sample{}, err
	}
	after, err := o.answered()
	if err != nil {
		return sample{}, err
	}
	if m.Bad > 0 {
		return sample{}, fmt.Errorf("%d replies differ from the server's own bytes", m.Bad)
	}
	santa := after - before
	s := sample{replies: m.PerSec(m.Good), received: m.PerSec(m.Replies), serverUSPer: m.ServerUSPer(m.Good),
		serverBusy: m.ServerBusyPct()}
	if m.Replies > 0 {
		s.bySanta = 100 * float64(santa) / float64(m.Replies)
	}
	return s, nil
}
