// Command mccheck runs the linearizability check (internal/mccheck) at
// length: Debian's memcached behind the real santad in a network
// namespace of its own, installers racing the writers by the agent's
// protocol (internal/mcrig), and the checker's writers and readers, for
// -ops operations (10^6 by default). With -agent, santa-offload memcached
// (in this process) attaches memcached and offloads what the readers make
// hot in place of the installers, as an operator runs it. It prints RESULT lines (operations,
// violations, the kernel's share of UDP gets, operations per second) and
// exits 1 if a violation was found.
//
// Needs root and the package memcached (make bench-deps); run from inside
// the module (it builds santad). Everything it starts or creates is
// removed on exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/mccheck"
	"github.com/santa-offload/santa/internal/mcrig"
)

func main() {
	def := mccheck.DefaultConfig()
	ops := flag.Int("ops", 1_000_000, "operations (writes, flushes, reads)")
	keys := flag.Int("keys", def.Keys, "keys written and read")
	writers := flag.Int("writers", def.Writers, "writers over TCP")
	udpWriters := flag.Int("udp-writers", def.UDPWriters, "writers over UDP")
	readers := flag.Int("readers", def.Readers, "readers over UDP")
	tcpReaders := flag.Int("tcp-readers", def.TCPReaders, "readers over TCP")
	installers := flag.Int("installers", 4, "rule installers racing the writers")
	agent := flag.Bool("agent", false, "santa-offload memcached chooses and installs the rules, not the installers")
	pause := flag.Duration("write-pause", 2*time.Millisecond, "each writer's pause between batches")
	deadline := flag.Duration("deadline", 10*time.Minute, "bound on the run's time")
	seed := flag.Uint64("seed", def.Seed, "seed of the checker's choices")
	kinds := flag.String("kinds", "", "the write kinds used, comma-separated (empty: all; mccheck.AllKinds)")
	flag.Parse()
	if *agent {
		*installers = 0
	}
	var used []mccheck.Kind
	for k := range strings.SplitSeq(*kinds, ",") {
		if k != "" {
			used = append(used, mccheck.Kind(k))
		}
	}
	violations, err := run(*ops, *keys, *writers, *udpWriters, *readers, *tcpReaders, *installers, *pause, *deadline, *seed, used)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mccheck:", err)
		os.Exit(2)
	}
	if violations > 0 {
		os.Exit(1)
	}
}

// run runs the check and returns how many violations it found; with no
// installers, the agent installs.
func run(ops, keys, writers, udpWriters, readers, tcpReaders, installers int, pause, deadline time.Duration, seed uint64,
	kinds []mccheck.Kind) (int, error) {
	dir, err := os.MkdirTemp("", "mccheck")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	r, err := mcrig.Start(dir, "mcbench", installers > 0)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cfg := r.CheckConfig()
	cfg.Ops, cfg.Keys, cfg.Deadline, cfg.WritePause, cfg.Seed = ops, keys, deadline, pause, seed
	cfg.Writers, cfg.UDPWriters, cfg.Readers, cfg.TCPReaders = writers, udpWriters, readers, tcpReaders
	cfg.Kinds = kinds
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	// SIGINT or SIGTERM ends the run early, still cleaning up.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ictx, stopInstallers := context.WithCancel(ctx)
	defer stopInstallers()
	name := "mccheck"
	wait := func() (mcrig.InstallStats, error) { return mcrig.InstallStats{}, nil }
	if installers > 0 {
		wait, err = r.Installers(ictx, cfg, installers, mcrig.GenerationFirst)
	} else {
		name += "/agent"
		var agentDone func() error
		agentDone, err = r.Agent(ictx, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		wait = func() (mcrig.InstallStats, error) { return mcrig.InstallStats{}, agentDone() }
	}
	if err != nil {
		return 0, err
	}
	rep, err := mccheck.Run(ctx, cfg)
	st, aerr := domainStats(r)
	stopInstallers()
	inst, ierr := wait()
	if err != nil {
		return 0, err
	}
	if ierr != nil {
		return 0, ierr
	}
	if installers > 0 {
		fmt.Fprintf(os.Stderr, "installers: %s\n", inst)
	}
	fmt.Fprint(os.Stderr, rep)
	result := func(what string, v float64, unit string) {
		fmt.Printf("RESULT name=%s/%s value=%.3f unit=%s\n", name, what, v, unit)
	}
	result("ops", float64(rep.Ops), "ops")
	result("violations", float64(len(rep.Violations)), "reads")
	result("kernel_share", 100*rep.KernelShare(), "%")
	result("ops_per_s", float64(rep.Ops)/rep.Elapsed.Seconds(), "ops/s")
	result("udp_timeouts", float64(rep.UDPTimeouts), "requests")
	if installers > 0 {
		result("rules_installed", float64(inst.Installed), "rules")
	}
	if aerr != nil {
		fmt.Fprintf(os.Stderr, "the domain's counters: %v\n", aerr)
	} else {
		result("sets_answering", float64(st.Refreshed), "sets")
		result("gets_refilling", float64(st.Filled), "replies")
	}
	return len(rep.Violations), nil
}

// domainStats are the counters of the domain of memcached's UDP service,
// the installers' or the agent's, while it is attached: among them how
// many sets' values the kernel answered with and how many gets' replies
// refilled a rule (docs/memcached.md, "Answering after a set", "Refilled
// from a get's reply").
func domainStats(r *mcrig.Rig) (client.MemcachedStats, error) {
	udp := r.UDP
	if udp == 0 {
		svcs, err := r.Client.Services()
		if err != nil {
			return client.MemcachedStats{}, err
		}
		for _, s := range svcs {
			if s.Protocol == syscall.IPPROTO_UDP && s.Port == mcrig.Addr.Port() {
				udp = s.ServiceID
			}
		}
	}
	return r.Client.MemcachedStats(udp)
}
