package mccheck

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func fakeConfig(m *fakeMC) Config {
	cfg := DefaultConfig()
	cfg.TCP, cfg.UDP = m.addrs()
	cfg.Keys, cfg.Ops, cfg.Deadline = 24, 30_000, 30*time.Second
	cfg.FlushEvery = 500
	return cfg
}

// Against a correct memcached, no violation, and every kind of command
// was sent.
func TestRunCorrect(t *testing.T) {
	m := startFake(t, fakeFaults{})
	rep, err := Run(context.Background(), fakeConfig(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.String())
	// Timeouts are possible on a loaded machine: not violations.
	if len(rep.Violations) != 0 {
		t.Fatalf("a correct memcached: %d violations", len(rep.Violations))
	}
	if rep.Ops < 30_000 {
		t.Errorf("%d operations, want at least 30000", rep.Ops)
	}
	for _, form := range []string{"set", "add", "replace", "append", "prepend", "cas", "incr", "decr", "delete", "touch",
		"ms", "md", "ma", "set noreply", "delete noreply", "ms q", "md q", "flush_all", "udp set", "udp incr", "udp ma"} {
		if rep.Writes[form] == 0 && !strings.HasPrefix(form, "flush_all") {
			t.Errorf("no %q sent: %v", form, rep.Writes)
		}
	}
	if rep.Writes["flush_all"]+rep.Writes["flush_all 1"]+rep.Writes["flush_all 2"] == 0 {
		t.Errorf("no flush_all sent: %v", rep.Writes)
	}
	for _, r := range []string{"udp get hit", "udp get miss", "tcp get hit", "tcp mg hit", "tcp gets hit"} {
		if rep.Reads[r] == 0 {
			t.Errorf("no %q read: %v", r, rep.Reads)
		}
	}
}

// A cache that keeps its answers for a while after writes is caught:
// stale values and stale misses, each with the writes that prove it.
func TestRunCatchesStale(t *testing.T) {
	m := startFake(t, fakeFaults{staleFor: 30 * time.Millisecond})
	cfg := fakeConfig(m)
	cfg.Ops = 20_000
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) == 0 {
		t.Fatalf("a stale cache was not caught:\n%s", rep)
	}
	var value, missing bool
	for _, v := range rep.Violations {
		if v.Via != "udp get" {
			t.Errorf("a violation over %s, where memcached is correct: %s", v.Via, v)
		}
		if v.From == nil || v.From.Acked < 0 || v.From.Acked > v.Sent && v.Outcome == miss {
			t.Errorf("a violation without the write it comes from: %s", v)
		}
		switch {
		case v.Outcome == hit && v.Newer != nil:
			value = true
			if v.Newer.Acked >= v.Sent || v.Newer.Seq <= v.From.Seq {
				t.Errorf("the newer write is not acknowledged before the read: %s", v)
			}
		case v.Outcome == miss:
			missing = true
		}
	}
	if !value || !missing {
		t.Errorf("stale values caught: %t, stale misses: %t; want both\n%s", value, missing, rep)
	}
	t.Logf("%d violations, the first: %s", len(rep.Violations), rep.Violations[0])
}

// UDP requests lost are timeouts, not violations; a key whose UDP write
// was lost is given up, its later reads unchecked.
func TestRunUDPLoss(t *testing.T) {
	m := startFake(t, fakeFaults{dropEvery: 97})
	rep, err := Run(context.Background(), fakeConfig(m))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) != 0 || rep.UDPTimeouts == 0 {
		t.Fatalf("%d violations, %d timeouts: want none and some\n%s", len(rep.Violations), rep.UDPTimeouts, rep)
	}
	t.Logf("%d timeouts, %d reads unchecked", rep.UDPTimeouts, rep.Unchecked)
}

// A reply for another key is reported as a violation.
func TestRunWrongKey(t *testing.T) {
	m := startFake(t, fakeFaults{wrongKeyEvery: 50})
	cfg := fakeConfig(m)
	cfg.Ops = 5000
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) == 0 {
		t.Fatalf("replies for another key were not caught:\n%s", rep)
	}
	for _, v := range rep.Violations {
		if v.Outcome != failed || !strings.Contains(v.Value, "VALUE other") {
			t.Errorf("a violation other than the wrong key's: %s", v)
		}
	}
}

// memcached closing the connections ends the run with an error, at once,
// and the report holds what was checked until then.
func TestRunServerGone(t *testing.T) {
	m := startFake(t, fakeFaults{closeAfter: 3000})
	cfg := fakeConfig(m)
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "TCP") {
		t.Fatalf("got %v, want the TCP error", err)
	}
	if took := time.Since(start); took > 5*time.Second || rep.Ops == 0 || len(rep.Violations) != 0 {
		t.Errorf("after %v: %d operations, %d violations\n%s", took, rep.Ops, len(rep.Violations), rep)
	}
	t.Log(err)
}

func TestRunBounds(t *testing.T) {
	m := startFake(t, fakeFaults{})
	cfg := fakeConfig(m)
	cfg.Ops, cfg.Deadline = 1_000_000_000, 300*time.Millisecond
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second || rep.Ops == 0 {
		t.Errorf("a 300-ms run took %v for %d operations", took, rep.Ops)
	}
	kernel := uint64(0)
	cfg.Ops, cfg.Deadline = 2000, time.Minute
	cfg.KernelAnswered = func() (uint64, error) { kernel += 7; return kernel, nil }
	if rep, err = Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// Outside the budget: the setup's set of each key, a cas's gets of
	// its unique, and the flush_alls a batch may carry.
	extra := cfg.Keys
	for via, n := range rep.Reads {
		if strings.HasPrefix(via, "tcp gets ") {
			extra += n
		}
	}
	for f, n := range rep.Writes {
		if strings.HasPrefix(f, "flush_all") {
			extra += n
		}
	}
	if rep.Ops-extra != 2000 || !rep.KernelKnown || rep.KernelAnswered != 7 {
		t.Errorf("a run of 2000 operations: %d operations (%d outside the budget), kernel %d (%t)\n%s", rep.Ops, extra, rep.KernelAnswered, rep.KernelKnown, rep)
	}
}

func TestConfigValidate(t *testing.T) {
	m := startFake(t, fakeFaults{})
	good := fakeConfig(m)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.TCP = netip.AddrPort{} }, "TCP address"},
		{func(c *Config) { c.Keys = 0 }, "keys 0"},
		{func(c *Config) { c.KeyPrefix = "a b" }, "key prefix"},
		{func(c *Config) { c.Writers, c.UDPWriters = 0, 0 }, "want at least one of each"},
		{func(c *Config) { c.Keys, c.Writers = 2, 3 }, "a key of its own"},
		{func(c *Config) { c.Kinds = []Kind{"gat"} }, `write kind "gat"`},
		{func(c *Config) { c.Window = 0 }, "window 0"},
		{func(c *Config) { c.Deadline = 0 }, "deadline"},
	} {
		cfg := good
		c.change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", cfg, err, c.want)
		}
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("Run of an invalid config: no error")
		}
	}
}
