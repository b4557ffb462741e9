// Command dns is the paper's DNS scenario in the rig (bench/rig.sh): BIND 9,
// Knot and NSD from Debian's packages (internal/dnstest) serve a zone of
// -names names from the server namespace, one worker each, pinned to the
// server CPU. The XDP generator (bench/gen) asks for the names with
// uniform or Zipf popularity at a sweep of offered loads; every reply is
// counted and checked against the server's own reply bytes. Santa then
// takes over the top n names (the paper's top-N offload sweep: the
// oracle, which knows the true top n) on the server's very socket, taken
// from the running server with pidfd_getfd: its rules answer with the
// bytes the server would have sent. Offload levels are interleaved within
// each round; offload 0 is the server alone (Santa detached). dnsperf, the
// classic client, measures each server alone as well, for comparison with
// published figures. With -rule-counts, Santa then answers every request
// from k rules for each k (the paper's Figure 4).
//
// With -agent, the offload agent (santa-offload dns, with santad on the
// server veth) chooses the rules itself from the traffic: for each of its
// top-N limits, started with no rules under traffic, measured in 1 s
// slices against the oracle's top N, then at each offered load, and with
// dnsperf (a socket client: full UDP checksums) beside the generator.
// Server knot-xdp is Knot in its own XDP mode on the server veth, what a
// user would pick instead of Santa: measured alone (no Santa, no agent).
// The mechanics are bench/scenario's, shared with the memcached scenario.
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
	"strconv"
	"strings"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/dnstest"
)

type config struct {
	setup
	servers   []server
	dnsperf   time.Duration
	agentArgs []string
	agentLogs string
	agentCPU  int // santad's and the agent's; -1: the server's
}

// setup is what is measured with one zone size.
type setup struct {
	scenario.Config
	agent scenario.AgentConfig
}

// server is a configuration under test: a server, or Knot in its own XDP
// mode (knot-xdp).
type server struct {
	kind dnstest.Kind
	xdp  bool
}

func (s server) String() string {
	if s.xdp {
		return "knot-xdp"
	}
	return string(s.kind)
}

func main() {
	c, err := parseFlags()
	if err == nil {
		err = c.Rig.Run("dns", c.ServerCPU, c.ClientCPU, func(ctx context.Context, tmp string) error {
			return runAll(ctx, c, tmp)
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
	af := scenario.RegisterAgentFlags()
	srv := flag.String("servers", "bind,knot,nsd", "servers: bind, knot, nsd, knot-xdp (Knot in its own XDP mode, alone)")
	names := flag.Int("names", 1000, "names in the zone")
	flag.DurationVar(&c.dnsperf, "dnsperf", 10*time.Second, "dnsperf run per server alone, and per configuration with -agent (0: none)")
	agentArgs := flag.String("agent-flags", "", "more flags for santa-offload dns, space-separated")
	flag.StringVar(&c.agentLogs, "agent-logs", "", "keep each agent run's and its santad's logs in this directory")
	flag.IntVar(&c.agentCPU, "agent-cpu", -1, "CPU of santad and the agent (-1: the server's, where their work counts as the server machine's; "+
		"another shows what learning costs the server core, an experiment, not a result)")
	flag.Parse()
	for _, s := range strings.Split(*srv, ",") {
		sv := server{kind: dnstest.Kind(s)}
		if s == "knot-xdp" {
			sv = server{kind: dnstest.Knot, xdp: true}
		}
		if err := dnstest.Available(sv.kind); err != nil {
			return c, fmt.Errorf("-servers: %w", err)
		}
		c.servers = append(c.servers, sv)
	}
	if *names < 1 || *names > 1<<20 {
		return c, fmt.Errorf("-names %d: want 1 to %d", *names, 1<<20)
	}
	var err error
	if c.Config, err = f.Config(*names, 53, query); err != nil {
		return c, err
	}
	c.LearnKeyOffset = 2 // a query's bytes after its transaction id
	if c.agent, err = af.Config(*names); err != nil {
		return c, err
	}
	c.agentArgs = strings.Fields(*agentArgs)
	return c, nil
}

// runAll runs every server; the agent's binaries are built first if it
// is measured.
func runAll(ctx context.Context, c config, tmp string) error {
	var agent *scenario.OffloadAgent
	if c.agent.Levels != nil {
		if c.agentLogs != "" {
			if err := os.MkdirAll(c.agentLogs, 0o755); err != nil {
				return err
			}
		}
		var err error
		cpu := c.ServerCPU
		if c.agentCPU >= 0 {
			cpu = c.agentCPU
		}
		if agent, err = scenario.NewOffloadAgent(c.Rig, cpu, tmp, c.agentLogs, agentCommand(c.agentArgs)); err != nil {
			return err
		}
	}
	if c.dnsperf > 0 {
		if err := c.Rig.CheckClientTxChecksums(); err != nil {
			return err
		}
	}
	for _, sv := range c.servers {
		if err := runServer(ctx, c, sv, agent, tmp); err != nil {
			return fmt.Errorf("%s: %w", sv, err)
		}
	}
	return nil
}

// runServer starts one server, measures it with dnsperf, then runs the
// generator's sweep over popularity x offered load x offload level, the
// rule-count sweep if asked for, and the agent's sweep if asked for (then
// Knot in XDP mode gets dnsperf's runs with the popularity too; it is
// always measured alone).
func runServer(ctx context.Context, c config, sv server, agent *scenario.OffloadAgent, tmp string) error {
	s := c.setup
	dir, err := os.MkdirTemp(tmp, sv.String()+"-")
	if err != nil {
		return err
	}
	dc := dnstest.Config{Kind: sv.kind, Netns: s.Rig.ServerNS(), Dir: dir,
		Addrs: []netip.Addr{netip.MustParseAddr(rig.ServerIPv4)}, Threads: 1, Names: s.Items, Pin: true, CPU: s.ServerCPU}
	if sv.xdp {
		dc.XDP = s.Rig.ServerDev()
		s.Offload, s.RuleCounts, s.agent.Levels = []int{0}, nil, nil
	}
	t0 := time.Now()
	srv, err := dnstest.Start(dc)
	if err != nil {
		return err
	}
	defer srv.Stop()
	ready := time.Since(t0)
	id := fmt.Sprintf("dns/server=%s/names=%s", sv, dp.Human(s.Items))
	rss, err := rssMiB(srv.Pids())
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: serving %d names (ready in %v, %.0f MiB resident)\n", sv, s.Items, ready.Round(time.Millisecond), rss)
	fmt.Printf("RESULT name=%s/ready_s value=%.3f unit=s\n", id, ready.Seconds())
	fmt.Printf("RESULT name=%s/server_rss value=%.1f unit=MiB\n", id, rss)
	t0 = time.Now()
	b, err := scenario.Open(s.Config)
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(os.Stderr, "%s: its replies to the %d names captured in %v\n", sv, s.Items, time.Since(t0).Round(time.Millisecond))
	if c.dnsperf > 0 {
		if err := runDnsperfAlone(ctx, s, c.dnsperf, id, dir); err != nil {
			return err
		}
	}
	if err := b.Run(ctx, id); err != nil {
		return err
	}
	if agent == nil {
		return nil
	}
	// With the agent, dnsperf measures every configuration with the
	// sweep's popularity, Knot's XDP mode too.
	var cl *scenario.Client
	if c.dnsperf > 0 {
		cl = dnsperfClient(s, c.dnsperf, dir)
	}
	if s.agent.Levels == nil && cl == nil {
		return nil
	}
	var a scenario.Agent
	if s.agent.Levels != nil {
		agent.Sockets = b.Sockets()
		a = agent
	}
	for _, pop := range s.Popularities {
		if err := b.AgentSweep(ctx, id+"/popularity="+pop.String(), pop, a, s.agent, cl); err != nil {
			return err
		}
	}
	return nil
}

// agentCommand is the one place that knows the agent's command line:
// `santa-offload dns` offloading the query forms of the server on port 53
// (the bench's servers answer every client alike: -uniform-answers), with
// args after.
func agentCommand(args []string) scenario.AgentCommand {
	return func(socket string, maxRules int) []string {
		return append([]string{"dns", "-socket", socket, "-port", "53", "-uniform-answers",
			"-max-rules", strconv.Itoa(maxRules)}, args...)
	}
}

// rssMiB is the resident memory of processes pids (VmRSS), in MiB.
func rssMiB(pids []int) (float64, error) {
	var kib float64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				var n float64
				fmt.Sscan(v, &n) // "  123456 kB"
				kib += n
			}
		}
	}
	return kib / 1024, nil
}
