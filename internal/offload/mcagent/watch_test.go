package mcagent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/config"
)

// watch moves the clock by d and runs the watch.
func (r *rig) watch(d time.Duration) {
	r.clock = r.clock.Add(d)
	r.a.watch(context.Background())
}

// offload installs keys (each its own value) through a window, hottest
// first.
func (r *rig) offload(udp uint32, keys ...string) {
	r.t.Helper()
	hot := map[string]uint32{}
	for i, k := range keys {
		r.mc.set(k, k, -1)
		hot[get(k)] = uint32(1000 * (len(keys) - i))
	}
	r.d.setHot(udp, hot)
	r.window(time.Second)
	r.d.setHot(udp, nil)
	if n := len(r.d.rules(udp)); n != len(keys) {
		r.t.Fatalf("%d rules; want %d", n, len(keys))
	}
}

// gen is generation g of key k's slot in the rig's live domain.
func (r *rig) gen(g uint32) client.Generation {
	return client.Generation{Gen: g, DomainGen: 1, Epoch: r.d.epoch}
}

// TestWatchRereadsKilledKeys: once the domain's bumps move, the watch
// checks the offloaded keys' generations and reads again, at once, only
// the keys written since their rule: a TCP read, no UDP get (the reply is
// rebuilt from the item), the rule replaced in place with the new value
// and the generation the check read. While nothing is written, it reads
// nothing but the domain's counters.
func TestWatchRereadsKilledKeys(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.offload(udp, "k1", "k2", "k3")
	id := r.d.rules(udp)["k2"].RuleID
	udpGets, tcpReads := r.mc.udp, r.mc.tcp

	r.watch(50 * time.Millisecond)
	if s := r.a.snapshot(); s.checks != 0 {
		t.Fatalf("%d generations checked with nothing written; want none", s.checks)
	}
	r.mc.set("k2", "new", -1)
	r.d.setGen("k2", r.gen(3))
	r.watch(50 * time.Millisecond)
	e := r.d.rules(udp)["k2"]
	if e.RuleID != id || e.Guard.Gen != 3 || !equalRule(e, getRule([]byte(get("k2")), reply("k2", "new"))) {
		t.Fatalf("k2 after a write: rule %d %v guard %+v; want rule %d replaced with the new value at gen 3", e.RuleID, e.Rule, e.Guard, id)
	}
	for _, k := range []string{"k1", "k3"} {
		if g := r.d.rules(udp)[k].Guard.Gen; g != 1 {
			t.Errorf("%s, not written, guard gen %d; want 1", k, g)
		}
	}
	s := r.a.snapshot()
	if s.checks != 3 || s.killed != 1 || s.refreshed != 1 || r.mc.tcp != tcpReads+1 || r.mc.udp != udpGets {
		t.Errorf("checks %d, killed %d, refreshed %d, TCP reads %d, UDP gets %d; want 3, 1, 1, 1 read of k2 alone, no UDP get",
			s.checks, s.killed, s.refreshed, r.mc.tcp-tcpReads, r.mc.udp-udpGets)
	}
	r.watch(50 * time.Millisecond)
	r.watch(50 * time.Millisecond)
	if s := r.a.snapshot(); s.checks != 3 || r.d.txns != 1 {
		t.Errorf("%d checks, %d transactions after watches with nothing written; want 3, 1", s.checks, r.d.txns)
	}
}

// The watch checks at most watch_rate generations a second, the keys
// with the most gets since their check first, and the others at the
// TestWatchKeepsFreshKeys: a key written by a set whose value the kernel
// answers with (Fresh) is alive: its rule stays as it is, not read again.
func TestWatchKeepsFreshKeys(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.offload(udp, "k1", "k2")
	before := r.d.rules(udp)["k2"]
	tcpReads := r.mc.tcp
	r.mc.set("k2", "new", -1)
	fresh := r.gen(3)
	fresh.Fresh = true
	r.d.setGen("k2", fresh)
	r.watch(50 * time.Millisecond)
	if e := r.d.rules(udp)["k2"]; e.RuleID != before.RuleID || e.Guard.Gen != before.Guard.Gen || !equalRule(e, before.Rule) {
		t.Fatalf("k2 after a set the kernel answers with: rule %d guard %+v; want rule %d as it was", e.RuleID, e.Guard, before.RuleID)
	}
	if s := r.a.snapshot(); s.fresh != 1 || s.killed != 0 || r.mc.tcp != tcpReads {
		t.Fatalf("fresh %d, killed %d, TCP reads %d; want 1, 0, none", s.fresh, s.killed, r.mc.tcp-tcpReads)
	}
	// A later write whose value the kernel does not have kills it.
	r.d.setGen("k2", r.gen(5))
	r.watch(time.Second)
	if e := r.d.rules(udp)["k2"]; e.Guard.Gen != 5 {
		t.Fatalf("k2 after a write the kernel does not answer with: guard %+v; want it read again at gen 5", e.Guard)
	}
}

// next watches, until every key is checked since the bumps last moved.
func TestWatchBudget(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Watch, c.WatchRate = config.Duration(50*time.Millisecond), 40 }) // 2 a watch
	r.scan()
	_, udp := r.services()
	r.offload(udp, "a", "b", "c")
	for _, k := range []string{"a", "b", "c"} {
		r.d.setGen(k, r.gen(2))
	}
	r.watch(50 * time.Millisecond)
	rules := r.d.rules(udp)
	if rules["a"].Guard.Gen != 2 || rules["b"].Guard.Gen != 2 || rules["c"].Guard.Gen != 1 || r.a.snapshot().checks != 2 {
		t.Fatalf("guards a %d, b %d, c %d after %d checks; want the two hottest read again (2 checks)",
			rules["a"].Guard.Gen, rules["b"].Guard.Gen, rules["c"].Guard.Gen, r.a.snapshot().checks)
	}
	r.watch(50 * time.Millisecond)
	if g := r.d.rules(udp)["c"].Guard.Gen; g != 2 || r.a.snapshot().checks != 3 {
		t.Errorf("c's guard gen %d after %d checks; want 2 after 3: checked at the next watch", g, r.a.snapshot().checks)
	}
}

// A key with a write in flight is not read until the write is done (its
// generation then moves on); a write that races the read leaves the rule
// guarded at the generation the check read, dead, and the next watch
// reads the key again. A key memcached no longer has loses its rule.
func TestWatchRaces(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.offload(udp, "k1", "k2")
	r.d.setGen("k1", client.Generation{Gen: 2, DomainGen: 1, Epoch: r.d.epoch, InFlight: true})
	r.watch(50 * time.Millisecond)
	if g := r.d.rules(udp)["k1"].Guard.Gen; g != 1 || r.a.snapshot().killed != 0 {
		t.Fatalf("k1, in flight, guard gen %d, %d killed; want left at 1", g, r.a.snapshot().killed)
	}
	r.d.setGen("k1", r.gen(3))
	r.mc.set("k1", "v3", -1)
	r.mc.onRead = func() {
		r.mc.onRead = nil
		r.d.setGen("k1", r.gen(4)) // a set arrives as memcached answers
		r.mc.items["k1"] = item{flags: "0", data: []byte("v4"), ttl: -1}
	}
	r.watch(50 * time.Millisecond)
	if e := r.d.rules(udp)["k1"]; e.Guard.Gen != 3 || !equalRule(e, getRule([]byte(get("k1")), reply("k1", "v4"))) {
		t.Fatalf("k1 read as a write raced: guard %+v; want gen 3, read before the item", e.Guard)
	}
	r.watch(50 * time.Millisecond)
	if g := r.d.rules(udp)["k1"].Guard.Gen; g != 4 {
		t.Fatalf("k1's guard gen %d after the next watch; want 4", g)
	}
	delete(r.mc.items, "k2")
	r.d.setGen("k2", r.gen(2))
	r.watch(50 * time.Millisecond)
	if _, ok := r.d.rules(udp)["k2"]; ok || r.a.snapshot().deleted[skipMiss] != 1 {
		t.Errorf("k2, deleted from memcached, still has a rule; deleted %v", r.a.snapshot().deleted)
	}
}

// A key whose reply memcached wrote otherwise than udpReply does is read
// again with a UDP get, as when it was learned; a dead domain is read no
// further.
func TestWatchUDPWhenNotRebuilt(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.mc.padded["k1"] = true
	r.offload(udp, "k1")
	udpGets := r.mc.udp
	r.mc.set("k1", "new", -1)
	r.d.setGen("k1", r.gen(2))
	r.watch(50 * time.Millisecond)
	if e := r.d.rules(udp)["k1"]; e.Guard.Gen != 2 || r.mc.udp != udpGets+1 {
		t.Fatalf("guard %+v, %d UDP gets; want gen 2 read with one", e.Guard, r.mc.udp-udpGets)
	}
	r.d.setGen("k1", client.Generation{})
	r.watch(50 * time.Millisecond)
	if g := r.d.rules(udp)["k1"].Guard.Gen; g != 2 || r.mc.udp != udpGets+1 {
		t.Errorf("k1 read again in a dead domain: guard gen %d", g)
	}
}

// Of two keys equally hot, the one each check finds written is checked
// far more often than the one never written, once the watch has seen
// both: the budget goes where rules die.
func TestWatchPrefersWrittenKeys(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Watch, c.WatchRate = config.Duration(50*time.Millisecond), 20 }) // 1 a watch
	r.scan()
	_, udp := r.services()
	for _, k := range []string{"quiet", "written"} {
		r.mc.set(k, k, -1)
	}
	r.d.setHot(udp, map[string]uint32{get("quiet"): 1000, get("written"): 1000}) // a rule pays in 32 ms
	r.window(time.Second)
	r.d.setHot(udp, nil)
	r.d.mu.Lock()
	clear(r.d.genReads) // those of learning
	r.d.mu.Unlock()
	for i := range 40 {
		r.d.setGen("written", r.gen(uint32(2+i)))
		r.watch(50 * time.Millisecond)
	}
	r.d.mu.Lock()
	quiet, written := r.d.genReads["quiet"], r.d.genReads["written"]
	r.d.mu.Unlock()
	if quiet+written != 40 || written < 3*quiet {
		t.Errorf("in 40 watches of one check: the written key checked %d times, the quiet one %d; want 40 in all, 3 times as many of the written", written, quiet)
	}
}

// The watch weighs the hottest keys and, in turn, as many of the colder
// ones: with room for one check a watch, a cold key written is read again
// once every key has had its check, each key checked once.
func TestWatchTurnsThroughColdKeys(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Watch, c.WatchRate = config.Duration(50*time.Millisecond), 20 }) // 1 a watch
	r.scan()
	_, udp := r.services()
	var keys []string
	for i := range 12 {
		keys = append(keys, fmt.Sprintf("k%02d", i))
	}
	r.offload(udp, keys...)
	r.window(time.Second) // sorts the keys by rate
	r.mc.set("k11", "new", -1)
	r.d.setGen("k11", r.gen(2))
	for range 12 {
		r.watch(50 * time.Millisecond)
	}
	if e := r.d.rules(udp)["k11"]; e.Guard.Gen != 2 || r.a.snapshot().checks != 12 {
		t.Errorf("the coldest key, written: guard gen %d after %d checks; want 2 after 12, one a key", e.Guard.Gen, r.a.snapshot().checks)
	}
}

// TestWatchWriteHot: a key whose rule a write killed after fewer gets than
// reading it again costs waits before it is read again, 1 s, then twice
// as long if it is killed as soon again; memcached answers it meanwhile,
// and the watch does not spend checks on it.
func TestWatchWriteHot(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.mc.set("k1", "k1", -1)
	r.d.setHot(udp, map[string]uint32{get("k1"): 10}) // 10 gets a second
	r.window(time.Second)
	r.d.setHot(udp, nil)
	gen := func() uint32 { return r.d.rules(udp)["k1"].Guard.Gen }

	for i, wait := range []time.Duration{time.Second, 2 * time.Second} {
		written := uint32(3 + i)
		r.mc.set("k1", fmt.Sprint("v", written), -1)
		r.d.setGen("k1", r.gen(written))
		r.watch(50 * time.Millisecond) // 0.5 gets since it was read
		if g := gen(); g == written {
			t.Fatalf("kill %d: k1 read again at once after 0.5 gets", i+1)
		}
		if s := r.a.snapshot(); s.waits != uint64(i+1) {
			t.Fatalf("kill %d: %d waits counted; want %d", i+1, s.waits, i+1)
		}
		checks := r.a.snapshot().checks
		r.watch(wait - 100*time.Millisecond)
		if g := gen(); g == written {
			t.Fatalf("kill %d: k1 read again before its wait of %v", i+1, wait)
		}
		if s := r.a.snapshot(); s.checks != checks {
			t.Fatalf("kill %d: k1's generation checked %d times while it waited; want none", i+1, s.checks-checks)
		}
		r.watch(100 * time.Millisecond)
		if g := gen(); g != written {
			t.Fatalf("kill %d: k1 guard gen %d after its wait of %v; want %d, read again", i+1, g, wait, written)
		}
	}
}
