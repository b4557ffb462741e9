// Command memcached is the paper's memcached scenario (section 5.6) in the
// rig (bench/rig.sh): memcached from Debian's package, one worker thread,
// UDP on, pinned to the server CPU, holds -keys keys like Facebook's USR
// pool (16 and 21 bytes, 2-byte values). The XDP generator (bench/gen)
// sends UDP GETs with power-law popularity at a sweep of offered loads;
// every reply is checked against memcached's own bytes. Santa then answers
// the top n keys on memcached's very socket (the paper's Figure 7b),
// with the replies memcached gave, its UDP request id copied from each
// request. The mechanics are bench/scenario's, shared with bench/dns.
//
// With -agent, the product runs as an operator runs it: santad on the
// server veth and `santa-offload memcached` offloading, with guarded
// rules, what the generator makes hot, at each top-N limit, against the
// oracle's top N (scenario.AgentSweep). With -set-share, every sweep's
// GETs are a mix with SETs over TCP (mixWriter).
//
// Needs root and the package memcached (make bench-deps). Everything it
// starts or creates is removed on exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/mcitems"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/netproc"
	"github.com/santa-offload/santa/internal/popularity"
)

const port = 11211

func main() {
	f := scenario.RegisterFlags(scenario.Defaults{Rig: "sbmc", Popularity: "zipf:1", Offload: "0,1000,10000,all",
		Rates: "100000,200000,300000,1000000,0"})
	af := scenario.RegisterAgentFlags()
	keys := flag.Int("keys", 100000, "keys stored")
	share := flag.Float64("set-share", 0, "share of SETs among the operations served, over TCP beside the generator's GETs (0: GETs only)")
	setPop := flag.String("set-popularity", "", "with -set-share: the SETs' keys drawn with this popularity (uniform, zipf:S) instead of the GETs'")
	agentArgs := flag.String("agent-flags", "", "more flags for santa-offload memcached, space-separated")
	agentLogs := flag.String("agent-logs", "", "keep each agent run's and its santad's logs in this directory")
	client := flag.Duration("client", 0, "with -agent: a socket client with full checksums runs this long against memcached alone, the oracle and the agent at each level (0: none)")
	setCost := flag.Duration("set-cost", 0, "the write path's added cost: a SET load over TCP for this long per run, memcached alone and with the agent (0: not measured)")
	flag.Parse()
	c, err := config(f, af, *keys, *share, *setCost)
	c.client = *client
	if err == nil && *setPop != "" {
		err = c.setKeys(*setPop)
	}
	if err == nil {
		err = c.Rig.Run("memcached", c.ServerCPU, c.ClientCPU, func(ctx context.Context, tmp string) error {
			return run(ctx, c, tmp, strings.Fields(*agentArgs), *agentLogs)
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "memcached:", err)
		os.Exit(1)
	}
}

// setup is what is measured.
type setup struct {
	scenario.Config
	agent   scenario.AgentConfig
	mix     *mixWriter               // nil: GETs only
	setCost time.Duration            // per run of the SET load (0: none)
	client  time.Duration            // per run of the socket client (0: none)
	dialTCP func() (net.Conn, error) // to memcached from the client namespace
}

func config(f *scenario.Flags, af *scenario.AgentFlags, keys int, share float64, setCost time.Duration) (setup, error) {
	var c setup
	if keys < 1 || keys > 1<<20 {
		return c, fmt.Errorf("-keys %d: want 1 to %d", keys, 1<<20)
	}
	if setCost < 0 {
		return c, fmt.Errorf("-set-cost %v: want a duration, or 0", setCost)
	}
	if share < 0 || share >= 1 {
		return c, fmt.Errorf("-set-share %v: want a share in [0, 1)", share)
	}
	var err error
	if c.Config, err = f.Config(keys, port, mcitems.Request); err != nil {
		return c, err
	}
	c.Check = mcitems.CheckReply
	c.LearnKeyOffset = 2 // a request's bytes after its UDP frame's request id
	c.setCost = setCost
	c.dialTCP = func() (net.Conn, error) { return c.Rig.Dial("tcp", port) }
	if share > 0 {
		c.Rig.SocketQueue = true // or the flood's drops stall the SETs' TCP
		c.mix = newMixWriter(c.dialTCP, keys, share)
		c.Beside = c.mix.run
		c.BesideOps = c.mix.sets.Load
	}
	c.agent, err = af.Config(keys)
	return c, err
}

// setKeys makes the mix's SETs draw their keys with popularity s.
func (c *setup) setKeys(s string) error {
	if c.mix == nil {
		return fmt.Errorf("-set-popularity %s: needs -set-share", s)
	}
	pop, err := popularity.Parse(s)
	if err != nil {
		return fmt.Errorf("-set-popularity: %w", err)
	}
	c.mix.keys = &pop
	return nil
}

// agentCommand is the agent's command line: `santa-offload memcached`
// offloading whatever holds port in the server namespace (not by -pid:
// `ip netns exec` hides the cgroup hierarchy), with args after.
func agentCommand(args []string) scenario.AgentCommand {
	return func(socket string, maxRules int) []string {
		return append([]string{"memcached", "-socket", socket, "-port", strconv.Itoa(port),
			"-max-rules", strconv.Itoa(maxRules)}, args...)
	}
}

// run starts memcached, stores the keys and runs the sweeps: the oracle's,
// then the agent's if asked for.
func run(ctx context.Context, c setup, tmp string, agentArgs []string, agentLogs string) error {
	argv := []string{"memcached", "-u", "root", "-l", rig.ServerIPv4, "-p", strconv.Itoa(port), "-U", strconv.Itoa(port),
		"-t", "1", "-m", "2048", "-c", "1024"}
	var conn net.Conn
	t0 := time.Now()
	srv, err := netproc.Start(netproc.Spec{Name: "memcached", Argv: argv, Netns: c.Rig.ServerNS(), LogPath: tmp + "/memcached.log",
		Pin: true, CPU: c.ServerCPU, Ready: func() error {
			var err error
			conn, err = c.Rig.Dial("tcp", port)
			return err
		}})
	if err != nil {
		if conn != nil { // ready, but pinning the server failed
			conn.Close()
		}
		return err
	}
	defer srv.Stop()
	err = mcitems.Store(conn, c.Items)
	conn.Close() // before the agent marks the listener: an open connection would hold its domain back
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "memcached: %d keys stored (in %v)\n", c.Items, time.Since(t0).Round(time.Millisecond))
	b, err := scenario.Open(c.Config)
	if err != nil {
		return err
	}
	defer b.Close()
	// (f)'s names are the oracle's sweep alone, which bench/report tables.
	id := "memcached/keys=" + dp.Human(c.Items)
	if c.agent.Levels != nil || c.setCost > 0 || c.mix != nil {
		id = "memcached-agent/keys=" + dp.Human(c.Items)
	}
	if c.mix != nil {
		id += fmt.Sprintf("/set_share=%g", c.mix.share)
		if c.mix.keys != nil {
			id += "/set_popularity=" + c.mix.keys.String()
		}
		defer func() { fmt.Printf("RESULT name=%s/sets value=%d unit=sets\n", id, c.mix.sets.Load()) }()
	}
	if err := b.Run(ctx, id); err != nil || (c.agent.Levels == nil && c.setCost == 0) {
		return err
	}
	return runAgent(ctx, c, b, id, tmp, agentArgs, agentLogs)
}

// runAgent runs the agent's sweep, if asked for, and the SET load, if
// asked for, with santad and santa-offload memcached built into tmp.
func runAgent(ctx context.Context, c setup, b *scenario.Bench, id, tmp string, agentArgs []string, agentLogs string) error {
	if agentLogs != "" {
		if err := os.MkdirAll(agentLogs, 0o755); err != nil {
			return err
		}
	}
	a, err := scenario.NewOffloadAgent(c.Rig, c.ServerCPU, tmp, agentLogs, agentCommand(agentArgs))
	if err != nil {
		return err
	}
	a.Sockets = b.Sockets() + 1 // and the TCP listener, which writes come through
	var agent scenario.Agent = a
	if c.mix != nil {
		agent = mixAgent{a, c.mix}
	}
	var cl *scenario.Client
	if c.client > 0 && c.agent.Levels != nil {
		if cl, err = socketClient(c, c.client); err != nil {
			return err
		}
	}
	for _, pop := range c.Popularities {
		if c.agent.Levels == nil {
			break
		}
		if err := b.AgentSweep(ctx, id+"/popularity="+pop.String(), pop, agent, c.agent, cl); err != nil {
			return err
		}
	}
	if c.setCost == 0 {
		return nil
	}
	return setCost(ctx, c, a, id, c.setCost)
}
