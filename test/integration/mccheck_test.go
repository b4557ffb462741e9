package integration

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/mccheck"
	"github.com/santa-offload/santa/internal/mcrig"
)

// The linearizability check (internal/mccheck) of a real memcached from
// Debian behind the real santad (internal/mcrig): both of memcached's
// sockets attached and in one generation domain, and installers that
// follow the agent's protocol (docs/memcached.md, "Using it from santad")
// as fast as they can, racing the checker's writers: the generation, then
// memcached's value from a probe port, then a guarded rule answering it
// (a hit or a miss), replaced and deleted over and over. A control run
// with installers that read the value before the generation must be
// caught.
const (
	mcCheckOps        = 150_000
	mcCheckDeadline   = 3 * time.Minute
	mcCheckKeys       = 64
	mcCheckInstallers = 4
	mcCheckWritePause = 2 * time.Millisecond
	mcAgentRuns       = 4 // checks at most, until the agent has offloaded something
)

func TestMemcachedLinearizable(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("runs memcached and santad under load")
	}
	for i, v := range []struct {
		name       string
		udpWriters int
		order      mcrig.Order
		kinds      []mccheck.Kind // nil: all
	}{
		{"tcp-writers", 0, mcrig.GenerationFirst, nil},
		{"udp-writers", 1, mcrig.GenerationFirst, nil},
		// No meta command with q: the writers' connections keep their
		// replies known exactly, so stored sets' values answer
		// (docs/memcached.md, "Answering after a set").
		{"tcp-sets-answering", 0, mcrig.GenerationFirst, setsAnswering},
		// No write that may give a key an expiry: memcached's replies
		// to gets refill the rules the other writes killed
		// (docs/memcached.md, "Refilled from a get's reply").
		{"gets-refilling", 1, mcrig.GenerationFirst, getsRefilling},
		{"control-value-first", 0, mcrig.ValueFirst, nil},
	} {
		t.Run(v.name, func(t *testing.T) {
			r, err := mcrig.Start(t.TempDir(), "mcl"+string(rune('a'+i)), true)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := r.Close(); err != nil {
					t.Error(err)
				}
			})
			cfg := r.CheckConfig()
			cfg.Keys, cfg.Ops, cfg.Deadline, cfg.WritePause = mcCheckKeys, mcCheckOps, mcCheckDeadline, mcCheckWritePause
			cfg.UDPWriters = v.udpWriters
			cfg.Kinds = v.kinds
			rep := checkRacing(t, r, cfg, v.order)
			st, err := r.Client.MemcachedStats(r.UDP)
			switch {
			case v.kinds != nil && (err != nil || st.Refreshed == 0):
				t.Errorf("no set's value answered (%+v, %v): the check raced nothing of it", st, err)
			case v.name == "gets-refilling" && st.Filled == 0:
				t.Errorf("no get's reply refilled a rule (%+v): the check raced nothing of it", st)
			}
			switch {
			case v.order == mcrig.ValueFirst && len(rep.Violations) == 0:
				t.Errorf("rules built from a value read before the generation: no violation found")
			case v.order == mcrig.ValueFirst:
				t.Logf("rules built from a value read before the generation: %d violations found, as they must", len(rep.Violations))
			case len(rep.Violations) != 0:
				t.Errorf("%d violations (the first above)", len(rep.Violations))
			}
		})
	}
}

// setsAnswering is every write kind but the quiet ones.
var setsAnswering = []mccheck.Kind{mccheck.Set, mccheck.Add, mccheck.Replace, mccheck.Append, mccheck.Prepend,
	mccheck.CAS, mccheck.Incr, mccheck.Decr, mccheck.Delete, mccheck.Touch, mccheck.MetaSet, mccheck.MetaDel,
	mccheck.MetaArith, mccheck.NoReply, mccheck.FlushAll}

// getsRefilling is every write kind that cannot give a key an expiry.
var getsRefilling = []mccheck.Kind{mccheck.Set, mccheck.Add, mccheck.Replace, mccheck.Append, mccheck.Prepend,
	mccheck.CAS, mccheck.Incr, mccheck.Decr, mccheck.Delete, mccheck.NoReply, mccheck.FlushAll}

// checkRacing runs the checker with installers in order racing it, and
// fails the test if the check could not run, ran short, or raced nothing.
func checkRacing(t *testing.T, r *mcrig.Rig, cfg mccheck.Config, order mcrig.Order) mccheck.Report {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wait, err := r.Installers(ctx, cfg, mcCheckInstallers, order)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := mccheck.Run(context.Background(), cfg)
	stop()
	inst, ierr := wait()
	if err != nil || ierr != nil {
		t.Fatal(err, ierr)
	}
	t.Logf("installers: %s", inst)
	t.Logf("checker: %s", rep)
	st, err := r.Client.MemcachedStats(r.UDP)
	t.Logf("memcached stats: %+v %v", st, err)
	if rep.Ops < 100_000 {
		t.Errorf("%d operations in %v, want at least 100000", rep.Ops, rep.Elapsed)
	}
	if rep.KernelAnswered == 0 || inst.Installed == 0 {
		t.Errorf("the kernel answered %d gets from %d rules installed: the check raced nothing", rep.KernelAnswered, inst.Installed)
	}
	t.Logf("kernel share of UDP gets: %.1f %%", 100*rep.KernelShare())
	return rep
}

// TestMemcachedLinearizableAgent is the check with the memcached agent
// (santa-offload memcached, in this process) attaching memcached's sockets
// and offloading what the checker's readers make hot, in place of the
// racing installers: over TCP and UDP writers, 0 violations, and the
// kernel answering part of the gets.
func TestMemcachedLinearizableAgent(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("runs memcached, santad and the agent under load")
	}
	r, err := mcrig.Start(t.TempDir(), "mcla", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx, stop := context.WithCancel(context.Background())
	wait, err := r.Agent(ctx, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop()
		if err := wait(); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()

	cfg := r.CheckConfig()
	// More keys than writers rewrite at once, and a pause between write
	// batches, so that keys stay unchanged long enough for the agent to
	// offload them (it reads the hot set every window).
	cfg.Keys, cfg.Ops, cfg.Deadline, cfg.WritePause = 1024, mcCheckOps, mcCheckDeadline, 20*time.Millisecond
	cfg.UDPWriters = 1
	// The agent learns from the readers' traffic, so on a loaded machine
	// the first run may end before it has offloaded anything: the check
	// runs again, up to mcAgentRuns times in all, until the kernel has
	// answered some gets; every run must be free of violations.
	var kernel uint64
	for run := 1; run <= mcAgentRuns && kernel == 0; run++ {
		rep, err := mccheck.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: checker: %s", run, rep)
		t.Logf("run %d: kernel share of UDP gets: %.1f %%", run, 100*rep.KernelShare())
		if rep.Ops < 100_000 {
			t.Errorf("%d operations in %v, want at least 100000", rep.Ops, rep.Elapsed)
		}
		if len(rep.Violations) != 0 {
			t.Fatalf("%d violations (the first above)", len(rep.Violations))
		}
		kernel += rep.KernelAnswered
	}
	if kernel == 0 {
		t.Errorf("the kernel answered no get in %d runs: the agent offloaded nothing", mcAgentRuns)
	}
}
