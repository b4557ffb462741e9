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
	"strings"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
)

type config struct {
	scenario.Config
	servers []string
	dnsperf time.Duration
}

func main() {
	c, err := parseFlags()
	if err == nil {
		err = c.Rig.Run("dns", c.ServerCPU, c.ClientCPU, func(ctx context.Context, tmp string) error {
			for _, s := range c.servers {
				if err := runServer(ctx, c, servers[s], tmp); err != nil {
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
	c.servers = strings.Split(*srv, ",")
	for _, s := range c.servers {
		if _, ok := servers[s]; !ok {
			return c, fmt.Errorf("-servers: unknown server %q", s)
		}
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
func runServer(ctx context.Context, c config, s server, tmp string) error {
	dir, err := os.MkdirTemp(tmp, s.name+"-")
	if err != nil {
		return err
	}
	if err := writeZone(dir+"/zone", c.Items, rig.ServerIPv4); err != nil {
		return err
	}
	argv, err := s.config(dir, rig.ServerIPv4)
	if err != nil {
		return err
	}
	conn, err := c.Rig.Dial("udp", 53)
	if err != nil {
		return err
	}
	defer conn.Close()
	t0 := time.Now()
	srv, err := rig.StartServer(s.name, argv, c.Rig.ServerNS(), c.ServerCPU, dir+"/server.log", func() error {
		_, err := scenario.Capture(conn, query, []int{c.Items - 1})
		return err
	})
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(os.Stderr, "%s: serving %d names (ready in %v)\n", s.name, c.Items, time.Since(t0).Round(time.Millisecond))
	b, err := scenario.Open(c.Config)
	if err != nil {
		return err
	}
	defer b.Close()
	id := fmt.Sprintf("dns/server=%s/names=%s", s.name, dp.Human(c.Items))
	if c.dnsperf > 0 {
		if err := runDnsperf(ctx, c, id, dir); err != nil {
			return err
		}
	}
	return b.Run(ctx, id)
}
