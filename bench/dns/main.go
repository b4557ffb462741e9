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
// published figures. With -rule-counts, Santa then answers every request
// from k rules for each k (the paper's Figure 4). The mechanics are
// bench/scenario's, shared with the memcached scenario.
//
// Needs root and the packages bind9, knot, nsd, dnsperf (make bench-deps).
// Everything it starts or creates is removed on exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
)

type config struct {
	r                    rig.Rig
	servers              []string
	names                int
	pops                 []gen.Popularity
	offload              []int // names offloaded; names itself for "all"
	ruleCounts           []int // Figure 4: rules answering every request
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
	var srv, pops, offload, counts, rates string
	flag.StringVar(&c.r.Name, "rig", "sbdns", "rig name (namespaces NAME-srv, NAME-cli)")
	flag.StringVar(&c.r.Script, "rig-script", "bench/rig.sh", "path of rig.sh")
	flag.StringVar(&srv, "servers", "bind,knot,nsd", "servers: bind, knot, nsd")
	flag.IntVar(&c.names, "names", 1000, "names in the zone")
	flag.StringVar(&pops, "popularity", "uniform,zipf:1", "popularities: uniform, zipf:S")
	flag.StringVar(&offload, "offload", "0,100,all", "top-N offload sweep: names answered by Santa (all: every name)")
	flag.StringVar(&counts, "rule-counts", "", "Figure 4: Santa answers every request from this many rules (names), open loop (all: every name)")
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
	var err error
	if c.offload, err = parseCounts("-offload", offload, 0, c.names); err != nil {
		return c, err
	}
	if counts != "" {
		if c.ruleCounts, err = parseCounts("-rule-counts", counts, 1, c.names); err != nil {
			return c, err
		}
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

// parseCounts parses a list of name counts from lo to names, "all" for names.
func parseCounts(flagName, list string, lo, names int) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(s)
		if s == "all" {
			n, err = names, nil
		}
		if err != nil || n < lo || n > names {
			return nil, fmt.Errorf("%s: %q is not %d to %d or all", flagName, s, lo, names)
		}
		out = append(out, n)
	}
	return out, nil
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
// generator's sweep over popularity x offered load x offload level, and
// the rule-count sweep if asked for.
func runServer(ctx context.Context, c config, s server, tmp string) error {
	dir, err := os.MkdirTemp(tmp, s.name+"-")
	if err != nil {
		return err
	}
	if err := writeZone(dir+"/zone", c.names, rig.ServerIPv4); err != nil {
		return err
	}
	argv, err := s.config(dir, rig.ServerIPv4)
	if err != nil {
		return err
	}
	conn, err := scenario.Dial(c.r, 53)
	if err != nil {
		return err
	}
	defer conn.Close()
	t0 := time.Now()
	srv, err := scenario.StartServer(s.name, argv, c.r.ServerNS(), c.serverCPU, dir+"/server.log", func() error {
		_, err := scenario.Capture(conn, query, []int{c.names - 1})
		return err
	})
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(os.Stderr, "%s: serving %d names (ready in %v)\n", s.name, c.names, time.Since(t0).Round(time.Millisecond))
	b, err := scenario.Open(scenario.Config{Rig: c.r, Port: 53, Request: query, Items: c.names, Offload: c.offload,
		Rates: c.rates, Rounds: c.rounds, Duration: c.duration, RcvBuf: c.rcvbuf,
		ServerCPU: c.serverCPU, ClientCPU: c.clientCPU})
	if err != nil {
		return err
	}
	defer b.Close()
	id := fmt.Sprintf("dns/server=%s/names=%s", s.name, dp.Human(c.names))
	if c.dnsperf > 0 {
		if err := runDnsperf(ctx, c, id, dir); err != nil {
			return err
		}
	}
	for _, pop := range c.pops {
		if err := b.Sweep(ctx, id+"/popularity="+pop.String(), pop); err != nil {
			return err
		}
	}
	if len(c.ruleCounts) > 0 {
		return b.RuleCounts(ctx, id, c.ruleCounts)
	}
	return nil
}
