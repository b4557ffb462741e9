// Command dns is the paper's DNS scenario in the rig (bench/rig.sh): BIND 9,
// Knot and NSD from Debian's packages (internal/dnstest) serve a zone of
// -names names from the server namespace, one worker each, pinned to the
// server CPU. The XDP
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
	"net/netip"
	"os"
	"strings"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/dnstest"
)

type config struct {
	scenario.Config
	servers []dnstest.Kind
	dnsperf time.Duration
}

func main() {
	c, err := parseFlags()
	if err == nil {
		err = c.Rig.Run("dns", c.ServerCPU, c.ClientCPU, func(ctx context.Context, tmp string) error {
			for _, s := range c.servers {
				if err := runServer(ctx, c, s, tmp); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			return nil
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dns:", err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	var c config
	f := scenario.RegisterFlags(scenario.Defaults{Rig: "sbdns", Popularity: "uniform,zipf:1", Offload: "0,100,all",
		Rates: "50000,100000,150000,200000,300000,1000000,0"})
	srv := flag.String("servers", "bind,knot,nsd", "servers: bind, knot, nsd")
	names := flag.Int("names", 1000, "names in the zone")
	flag.DurationVar(&c.dnsperf, "dnsperf", 10*time.Second, "dnsperf run per server (0: none)")
	flag.Parse()
	for _, s := range strings.Split(*srv, ",") {
		if err := dnstest.Available(dnstest.Kind(s)); err != nil {
			return c, fmt.Errorf("-servers: %w", err)
		}
		c.servers = append(c.servers, dnstest.Kind(s))
	}
	if *names < 1 || *names > 1<<20 {
		return c, fmt.Errorf("-names %d: want 1 to %d", *names, 1<<20)
	}
	var err error
	c.Config, err = f.Config(*names, 53, query)
	return c, err
}

// runServer starts one server, measures it with dnsperf, then runs the
// generator's sweep over popularity x offered load x offload level, and
// the rule-count sweep if asked for.
func runServer(ctx context.Context, c config, k dnstest.Kind, tmp string) error {
	dir, err := os.MkdirTemp(tmp, string(k)+"-")
	if err != nil {
		return err
	}
	t0 := time.Now()
	srv, err := dnstest.Start(dnstest.Config{Kind: k, Netns: c.Rig.ServerNS(), Dir: dir,
		Addrs: []netip.Addr{netip.MustParseAddr(rig.ServerIPv4)}, Threads: 1, Names: c.Items, Pin: true, CPU: c.ServerCPU})
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(os.Stderr, "%s: serving %d names (ready in %v)\n", k, c.Items, time.Since(t0).Round(time.Millisecond))
	b, err := scenario.Open(c.Config)
	if err != nil {
		return err
	}
	defer b.Close()
	id := fmt.Sprintf("dns/server=%s/names=%s", k, dp.Human(c.Items))
	if c.dnsperf > 0 {
		if err := runDnsperf(ctx, c, id, dir); err != nil {
			return err
		}
	}
	return b.Run(ctx, id)
}
