package scenario

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/santa-offload/santa/internal/popularity"
)

// Defaults are a scenario command's defaults for the shared flags.
type Defaults struct {
	Rig, Popularity, Offload, Rates string
}

// Flags are the flags every scenario command has: the rig, the CPUs, the
// sweeps and their timing.
type Flags struct {
	c                            Config
	pops, offload, counts, rates string
}

// RegisterFlags defines the shared flags on flag.CommandLine.
func RegisterFlags(d Defaults) *Flags {
	f := &Flags{}
	flag.StringVar(&f.c.Rig.Name, "rig", d.Rig, "rig name (namespaces NAME-srv, NAME-cli)")
	flag.StringVar(&f.c.Rig.Script, "rig-script", "bench/rig.sh", "path of rig.sh")
	flag.StringVar(&f.pops, "popularity", d.Popularity, "popularities: uniform, zipf:S")
	flag.StringVar(&f.offload, "offload", d.Offload, "top-N offload sweep: items answered by Santa (all: every item)")
	flag.StringVar(&f.counts, "rule-counts", "", "Figure 4: Santa answers every request from this many rules, open loop (all: every item)")
	flag.StringVar(&f.rates, "rates", d.Rates, "offered loads, requests/s (0: open loop)")
	flag.BoolVar(&f.c.LearnCost, "learn-cost", false, "also measure the server alone, with Santa attached and no rule, and with Santa counting every passed request (learning), interleaved")
	flag.IntVar(&f.c.Rounds, "rounds", 3, "interleaved rounds")
	flag.DurationVar(&f.c.Duration, "duration", time.Second, "send time per run")
	flag.IntVar(&f.c.RcvBuf, "rcvbuf", 4<<20, "the server's socket receive buffer, bytes (0: its own)")
	flag.IntVar(&f.c.ServerCPU, "server-cpu", 1, "server CPU (server, server veth NAPI)")
	flag.IntVar(&f.c.ClientCPU, "client-cpu", 0, "client CPU (generator, classic client, client veth NAPI)")
	return f
}

// Config is the flags' configuration, after flag.Parse, for a server of
// items items on port with request.
func (f *Flags) Config(items int, port uint16, request Request) (Config, error) {
	c := f.c
	c.Items, c.Port, c.Request = items, port, request
	for _, p := range strings.Split(f.pops, ",") {
		pop, err := popularity.Parse(p)
		if err != nil {
			return c, err
		}
		c.Popularities = append(c.Popularities, pop)
	}
	var err error
	if c.Offload, err = parseCounts("-offload", f.offload, 0, items); err != nil {
		return c, err
	}
	if f.counts != "" {
		if c.RuleCounts, err = parseCounts("-rule-counts", f.counts, 1, items); err != nil {
			return c, err
		}
	}
	for _, r := range strings.Split(f.rates, ",") {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v < 0 {
			return c, fmt.Errorf("-rates: %q is not a rate", r)
		}
		c.Rates = append(c.Rates, v)
	}
	return c, c.check()
}

// parseCounts parses a list of item counts from lo to items, "all" for
// items; a count given twice ("1000,all" with 1000 items) is kept once.
func parseCounts(flagName, list string, lo, items int) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(s)
		if s == "all" {
			n, err = items, nil
		}
		if err != nil || n < lo || n > items {
			return nil, fmt.Errorf("%s: %q is not %d to %d or all", flagName, s, lo, items)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// AgentFlags are the flags of a scenario command with an offload agent
// (AgentSweep).
type AgentFlags struct {
	c      AgentConfig
	levels string
}

// RegisterAgentFlags defines the agent's flags on flag.CommandLine; the
// agent is off unless -agent names levels.
func RegisterAgentFlags() *AgentFlags {
	f := &AgentFlags{}
	flag.StringVar(&f.levels, "agent", "", "the offload agent's top-N limits (all: every item; empty: no agent)")
	flag.DurationVar(&f.c.Converge, "agent-converge", 20*time.Second,
		"traffic from the agent's start with no rules, measured in 1 s slices, before the offered loads")
	flag.Float64Var(&f.c.Rate, "agent-rate", 0, "offered load while the agent converges, requests/s (0: open loop)")
	flag.Float64Var(&f.c.Target, "agent-target", 0.9, "share of the oracle's replies/s whose time is reported")
	return f
}

// Config is the agent's configuration for items items, after flag.Parse;
// no levels, no agent.
func (f *AgentFlags) Config(items int) (AgentConfig, error) {
	c := f.c
	if f.levels == "" {
		return c, nil
	}
	var err error
	if c.Levels, err = parseCounts("-agent", f.levels, 1, items); err != nil {
		return c, err
	}
	switch {
	case c.Converge < time.Second:
		return c, fmt.Errorf("-agent-converge %v: want at least one 1 s slice", c.Converge)
	case c.Rate < 0:
		return c, fmt.Errorf("-agent-rate %v: want a rate, or 0 for open loop", c.Rate)
	case c.Target <= 0 || c.Target > 1:
		return c, fmt.Errorf("-agent-target %v: want a share in (0, 1]", c.Target)
	}
	return c, nil
}
