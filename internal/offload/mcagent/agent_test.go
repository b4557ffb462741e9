package mcagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/config"
	"github.com/santa-offload/santa/internal/offload/santadconn"
	"github.com/santa-offload/santa/internal/offload/server/servertest"
	"github.com/santa-offload/santa/rule"
)

// rig is an agent with a fake santad, a fake memcached and memcached's
// sockets (a TCP listener and a UDP socket of this process), on a clock
// the test moves.
type rig struct {
	t      *testing.T
	a      *agent
	d      *fakeSantad
	mc     *fakeMemcached
	finder *servertest.Finder
	conn   *fakeConn // the agent's last connection
	tcp    *net.TCPListener
	udp    *net.UDPConn
	clock  time.Time
}

func newRig(t *testing.T, config func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t, d: newFakeSantad(), mc: newFakeMemcached(), finder: &servertest.Finder{}, clock: time.Unix(1e9, 0)}
	r.sockets()
	cfg := DefaultConfig()
	cfg.Dial = func() (Santad, error) {
		r.conn = r.d.conn()
		return r.conn, nil
	}
	if config != nil {
		config(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r.a = newAgent(cfg, r.finder, take, r.mc, r.mc)
	r.a.now = func() time.Time { return r.clock }
	return r
}

// sockets opens memcached's sockets afresh (a restart).
func (r *rig) sockets() {
	r.t.Helper()
	tcp, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		r.t.Fatal(err)
	}
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { tcp.Close(); udp.Close() })
	r.tcp, r.udp = tcp, udp
	r.finder.Set(r.t, tcp, udp)
}

func (r *rig) scan() {
	r.t.Helper()
	if err := r.a.scan(); err != nil {
		r.t.Fatal(err)
	}
}

// window moves the clock by d and runs a window.
func (r *rig) window(d time.Duration) {
	r.clock = r.clock.Add(d)
	r.a.window(context.Background())
}

// The window loop follows santad's hot sets: a window for each newly
// numbered set, once; every Stale windows for a set that stays; every
// window for sets without numbers (santadconn.Follower).
func TestWindowsFollowHotSets(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.mc.set("k", "v", -1)
	r.d.setHot(udp, map[string]uint32{get("k"): 10})
	// follow runs the loop's polls over d of the clock: the windows run.
	follow := func(d time.Duration) uint64 {
		before := r.a.windows
		for range d / r.a.follower.Poll() {
			r.clock = r.clock.Add(r.a.follower.Poll())
			r.a.follow(context.Background())
		}
		return r.a.windows - before
	}
	r.d.setNumber(udp, 5)
	if n := follow(r.a.follower.Poll()); n != 1 {
		t.Fatalf("%d windows for the first set, want 1", n)
	}
	if n := follow(2 * time.Second); n != 0 {
		t.Errorf("%d windows for a set read already, want 0", n)
	}
	r.d.setNumber(udp, 6)
	if n := follow(r.a.follower.Poll()); n != 1 {
		t.Errorf("%d windows for the next set, want 1", n)
	}
	// A set that stays the same (a learner that stopped stepping): a
	// window every Stale windows nonetheless.
	window := time.Duration(r.a.cfg.Window)
	if n := follow(santadconn.Stale * window); n != 1 {
		t.Errorf("%d windows in %d windows of one set, want 1", n, santadconn.Stale)
	}
	// Sets without numbers (a santad of protocol version 4): a window
	// every window.
	r.d.setNumber(udp, 0)
	if n := follow(3 * window); n != 3 {
		t.Errorf("%d windows in 3 windows of unnumbered sets, want 3", n)
	}
	if got := r.d.rules(udp); len(got) != 1 {
		t.Errorf("santad has %d rules; want the hot key's", len(got))
	}
}

// offloadOne has the agent find memcached's sockets and offload key, hot
// for one window, and returns the UDP service's id.
func (r *rig) offloadOne(key, value string) (udp uint32) {
	r.t.Helper()
	r.scan()
	_, udp = r.services()
	r.mc.set(key, value, -1)
	r.d.setHot(udp, map[string]uint32{get(key): 10})
	r.window(time.Second)
	r.d.setHot(udp, nil)
	return udp
}

// services are the TCP and UDP services' ids.
func (r *rig) services() (tcp, udp uint32) {
	r.t.Helper()
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	if len(r.d.services) != 2 {
		r.t.Fatalf("santad has %d services; want 2", len(r.d.services))
	}
	for id, s := range r.d.services {
		if s.info.Protocol == syscall.IPPROTO_TCP {
			tcp = id
		} else {
			udp = id
		}
	}
	return tcp, udp
}

// get is the hot form of a get of key.
func get(key string) string { return string(hotForm([]byte(key))) }

// reply is memcached's UDP reply to a get of key with value (request id 0).
func reply(key, value string) []byte {
	r := append([]byte{0, 0}, oneDatagram...)
	return append(r, "VALUE "+key+" 0 "+strconv.Itoa(len(value))+"\r\n"+value+"\r\nEND\r\n"...)
}

// TestOffloadsHotGets: the listener starts the domain, the UDP socket
// joins it and learns from the request id on; of the hot requests, the
// single-key gets of keys memcached has become guarded rules on the UDP
// socket, answering memcached's bytes with the request's id, guarded by
// the key's generation and its item's deadline.
func TestOffloadsHotGets(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	tcp, udp := r.services()
	r.d.mu.Lock()
	if p := r.d.services[tcp].parser; p != (client.Parser{Kind: client.ParserMemcached, Domain: tcp}) {
		t.Errorf("the listener's parser is %+v; want a domain of its own", p)
	}
	if p := r.d.services[udp].parser; p != (client.Parser{Kind: client.ParserMemcached, Domain: tcp}) {
		t.Errorf("the UDP socket's parser is %+v; want the listener's domain", p)
	}
	if l := r.d.services[udp].learning; l != (client.Learning{KeyOffset: 2, ProbePort: 4242, Enabled: true}) {
		t.Errorf("learning %+v", l)
	}
	r.d.mu.Unlock()
	if r.mc.resets != 1 {
		t.Errorf("the TCP reader was reset %d times; want once, when the domain started", r.mc.resets)
	}
	r.mc.set("k1", "one", -1)
	r.mc.set("k2", "two", 10)
	r.mc.set("k3", "three", 2) // may expire at once: memcached's clock lags by up to 2 s
	r.d.setHot(udp, map[string]uint32{get("k1"): 10, get("k2"): 5, get("k3"): 5, get("nokey"): 20,
		string(oneDatagram) + "gets k1\r\n": 50, string(oneDatagram) + "get k1 k2\r\n": 50})
	r.window(time.Second)
	rules := r.d.rules(udp)
	if len(rules) != 2 || len(r.d.rules(tcp)) != 0 {
		t.Fatalf("rules %v on the UDP socket, %v on the listener; want k1 and k2 on the UDP socket", rules, r.d.rules(tcp))
	}
	for key, want := range map[string]struct {
		value string
		ms    uint32
	}{"k1": {"one", 0}, "k2": {"two", 8000 - 100}} {
		e := rules[key]
		if !equalRule(e, getRule([]byte(get(key)), reply(key, want.value))) {
			t.Errorf("%s: rule %+v", key, e.Rule)
		}
		if g := *e.Guard; g.Gen != 1 || g.Epoch != r.d.epoch || g.ExpiresInMS != want.ms {
			t.Errorf("%s: guard %+v; want gen 1, epoch %d, expiring in %d ms", key, g, r.d.epoch, want.ms)
		}
	}
	s := r.a.snapshot()
	if s.skipped[skipForm] != 2 || s.skipped[skipMiss] != 1 || s.skipped[skipExpiring] != 1 || s.installed != 2 {
		t.Errorf("skipped %v, installed %d; want 2 forms, a miss, an expiring item, 2 installed", s.skipped, s.installed)
	}
}

func equalRule(e client.RuleEntry, want rule.Rule) bool { return reflect.DeepEqual(e.Rule, want) }

// The generation is read before the item: a write that races the read
// leaves the rule guarded at the generation before it (dead in the
// kernel). A key with a write in flight, or a domain whose life ended,
// gets no rule.
func TestGenerationBeforeRead(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	epoch := r.d.epoch
	r.mc.set("k1", "old", -1)
	r.mc.set("k2", "two", -1)
	r.d.setGen("k1", client.Generation{Gen: 7, DomainGen: 3, Epoch: epoch})
	r.d.setGen("k2", client.Generation{Gen: 4, DomainGen: 3, Epoch: epoch, InFlight: true})
	r.mc.onRead = func() {
		r.d.setGen("k1", client.Generation{Gen: 8, DomainGen: 3, Epoch: epoch}) // a set arrived
	}
	r.d.setHot(udp, map[string]uint32{get("k1"): 10, get("k2"): 10})
	r.window(time.Second)
	rules := r.d.rules(udp)
	if g := rules["k1"].Guard; g == nil || g.Gen != 7 || g.DomainGen != 3 {
		t.Errorf("k1's guard %+v; want the generation read before the item, 7", g)
	}
	if _, ok := rules["k2"]; ok {
		t.Error("k2, with a write in flight, has a rule")
	}
	if s := r.a.snapshot(); s.skipped[skipInFlight] != 1 {
		t.Errorf("skipped %v; want one in flight", s.skipped)
	}
	r.mc.onRead = nil
	r.d.setGen("k2", client.Generation{Epoch: 0})
	r.window(time.Second)
	if _, ok := r.d.rules(udp)["k2"]; ok {
		t.Error("k2, in a dead domain, has a rule")
	}
}

// A key whose gets pass although it has a rule (its guard died: a write, a
// flush) is read again once its rule has had a whole hot window, and its
// rule replaced; a key memcached no longer has is deleted; so is one past
// max_age that memcached evicted.
func TestRefresh(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.mc.set("k1", "old", -1)
	r.d.setHot(udp, map[string]uint32{get("k1"): 100})
	r.window(time.Second)
	id := r.d.rules(udp)["k1"].RuleID
	r.mc.set("k1", "new", -1)
	r.d.setGen("k1", client.Generation{Gen: 2, DomainGen: 1, Epoch: r.d.epoch})
	r.window(time.Second) // passes still counted from before the rule
	if e := r.d.rules(udp)["k1"]; e.Guard.Gen != 1 || r.d.txns != 0 {
		t.Fatalf("k1 read again within a hot window of its install: guard %+v", e.Guard)
	}
	r.window(time.Second)
	e := r.d.rules(udp)["k1"]
	if e.RuleID != id || e.Guard.Gen != 2 || !equalRule(e, getRule([]byte(get("k1")), reply("k1", "new"))) || r.d.txns != 1 {
		t.Fatalf("k1 after a write: rule %d %v guard %+v (%d transactions); want rule %d replaced with the new value at gen 2",
			e.RuleID, e.Rule, e.Guard, r.d.txns, id)
	}
	// Deleted from memcached: the rule goes.
	delete(r.mc.items, "k1")
	r.window(3 * time.Second)
	if _, ok := r.d.rules(udp)["k1"]; ok || r.a.snapshot().deleted[skipMiss] != 1 {
		t.Fatalf("k1 deleted from memcached still has a rule; deleted %v", r.a.snapshot().deleted)
	}
	// Evicted without a write: found at max_age.
	r.mc.set("k2", "two", -1)
	r.d.setHot(udp, map[string]uint32{get("k2"): 10})
	r.window(time.Second)
	r.d.setHot(udp, nil)
	r.mc.evict("k2")
	r.window(time.Duration(r.a.cfg.MaxAge) / 2)
	if _, ok := r.d.rules(udp)["k2"]; !ok {
		t.Fatal("k2 deleted before max_age")
	}
	r.d.mu.Lock()
	for rid := range r.d.services[udp].rules {
		r.d.services[udp].hits[rid] += 1000 // still hot, answered by its rule
	}
	r.d.mu.Unlock()
	r.window(time.Duration(r.a.cfg.MaxAge) / 2)
	if _, ok := r.d.rules(udp)["k2"]; ok {
		t.Fatal("k2, evicted, still has a rule after max_age")
	}
}

// A key read again at max_age and found as its rule has it (no write, the
// same value) keeps its rule: no transaction, nothing for santad to index.
func TestMaxAgeConfirms(t *testing.T) {
	r := newRig(t, nil)
	udp := r.offloadOne("k1", "one")
	id := r.d.rules(udp)["k1"].RuleID
	tcpReads := r.mc.tcp
	r.mc.evict("other") // something was evicted: k1 may have been
	r.window(time.Duration(r.a.cfg.MaxAge))
	e, ok := r.d.rules(udp)["k1"]
	if !ok || e.RuleID != id || r.d.txns != 0 || r.mc.tcp == tcpReads || r.a.snapshot().confirmed != 1 {
		t.Fatalf("k1 at max_age: rule %d (%v), %d transactions, %d TCP reads, %d confirmed; want rule %d kept, "+
			"read again, confirmed", e.RuleID, ok, r.d.txns, r.mc.tcp-tcpReads, r.a.snapshot().confirmed, id)
	}
	// Written since (a new generation): replaced, even with the same value.
	r.d.setGen("k1", client.Generation{Gen: 2, DomainGen: 1, Epoch: r.d.epoch})
	r.mc.evict("other")
	r.window(time.Duration(r.a.cfg.MaxAge))
	if e := r.d.rules(udp)["k1"]; e.Guard.Gen != 2 || r.d.txns != 1 {
		t.Fatalf("k1 written: guard %+v, %d transactions; want replaced at gen 2", e.Guard, r.d.txns)
	}
}

// max_age reads a key again only if memcached evicted something since
// the key was read (or its counters could not be read): with no eviction,
// an item can leave memcached only by a write, which ends its rule.
func TestMaxAgeOnlyAfterEvictions(t *testing.T) {
	r := newRig(t, nil)
	udp := r.offloadOne("k1", "one")
	maxAge := time.Duration(r.a.cfg.MaxAge)
	tcpReads := r.mc.tcp
	r.window(maxAge)
	r.window(maxAge)
	if r.mc.tcp != tcpReads {
		t.Fatalf("k1 read again %d times at max_age with nothing evicted", r.mc.tcp-tcpReads)
	}
	r.mc.evict("k1")
	r.window(time.Second) // the eviction seen; k1 read long ago
	if _, ok := r.d.rules(udp)["k1"]; ok || r.mc.tcp != tcpReads+1 {
		t.Fatalf("k1 evicted: rule kept (%d reads); want it read again and deleted", r.mc.tcp-tcpReads)
	}
	// Counters that cannot be read count as an eviction.
	r.mc.set("k2", "two", -1)
	r.d.setHot(udp, map[string]uint32{get("k2"): 10})
	r.window(time.Second)
	r.d.setHot(udp, nil)
	r.mc.mu.Lock()
	r.mc.statsErr = errors.New("connection reset")
	r.mc.mu.Unlock()
	tcpReads = r.mc.tcp
	r.window(maxAge)
	if r.mc.tcp != tcpReads+1 {
		t.Fatalf("k2 read again %d times at max_age with memcached's stats unread; want 1", r.mc.tcp-tcpReads)
	}
}

// A rule's deadline is the item's time to live less 2 s (memcached's
// clock) and expiry_margin; near it, the item is read again: touched to
// live for ever, its rule loses the deadline.
func TestExpiry(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.mc.set("k1", "v", 6)
	r.d.setHot(udp, map[string]uint32{get("k1"): 10})
	r.window(time.Second)
	if g := r.d.rules(udp)["k1"].Guard; g == nil || g.ExpiresInMS != 4000-100 {
		t.Fatalf("guard %+v; want 3900 ms", g)
	}
	r.d.setHot(udp, nil)
	r.mc.set("k1", "v", -1)
	r.window(3 * time.Second) // not yet near
	if r.d.txns != 0 {
		t.Fatal("read again 1 s before its deadline")
	}
	r.window(time.Second - 100*time.Millisecond)
	if g := r.d.rules(udp)["k1"].Guard; g.ExpiresInMS != 0 || r.d.txns != 1 {
		t.Fatalf("guard %+v after the touch; want no deadline", g)
	}
}

// The top max_rules keys by rate are offloaded; a newcomer displaces an
// offloaded key only if its rate beats it by the hysteresis; keys that
// fall out are deleted.
func TestTopSet(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxRules = 2 })
	r.scan()
	_, udp := r.services()
	for _, k := range []string{"a", "b", "c", "d"} {
		r.mc.set(k, k, -1)
	}
	r.d.setHot(udp, map[string]uint32{get("a"): 100, get("b"): 80, get("c"): 10})
	r.window(time.Second)
	if rules := r.d.rules(udp); len(rules) != 2 || rules["a"].Guard == nil || rules["b"].Guard == nil {
		t.Fatalf("rules %v; want a and b", rules)
	}
	hit := func(key string, n uint64) {
		r.d.mu.Lock()
		defer r.d.mu.Unlock()
		for rid, e := range r.d.services[udp].rules {
			if string(e.Guard.Key) == key {
				r.d.services[udp].hits[rid] += n
			}
		}
	}
	// c at 100/s does not displace b at 80/s (×1.5 = 120); d at 200/s does.
	r.d.setHot(udp, map[string]uint32{get("c"): 100})
	hit("a", 300)
	hit("b", 80*3)
	r.window(3 * time.Second)
	if rules := r.d.rules(udp); len(rules) != 2 || rules["c"].Guard != nil {
		t.Fatalf("rules %v; c displaced an offloaded key within the hysteresis", rules)
	}
	r.d.setHot(udp, map[string]uint32{get("d"): 200})
	hit("a", 300)
	hit("b", 80)
	r.window(time.Second)
	if rules := r.d.rules(udp); len(rules) != 2 || rules["a"].Guard == nil || rules["d"].Guard == nil {
		t.Fatalf("rules %v; want a and d", rules)
	}
	if s := r.a.snapshot(); s.deleted["cold"] != 1 {
		t.Errorf("deleted %v; want b cold", s.deleted)
	}
}

// At the edge of the hot set, rates are a get or two a window: a newcomer
// is ranked by the least rate its gets show (rate.Least), so that a few
// lucky windows do not swap it with an offloaded key of the same rate,
// and one clearly hotter does.
func TestTopSetEdge(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxRules = 1 })
	r.scan()
	_, udp := r.services()
	for _, k := range []string{"a", "b", "c"} {
		r.mc.set(k, k, -1)
	}
	r.d.setHot(udp, map[string]uint32{get("a"): 1})
	r.window(time.Second)
	hitA := func() {
		r.d.mu.Lock()
		defer r.d.mu.Unlock()
		for rid := range r.d.services[udp].rules {
			r.d.services[udp].hits[rid]++ // a: 1 a second, answered by its rule
		}
	}
	// b at 3/s for 3 windows does not show more than a's 1/s × 1.5.
	for range 3 {
		r.d.setHot(udp, map[string]uint32{get("b"): 3})
		hitA()
		r.window(time.Second)
		if rules := r.d.rules(udp); len(rules) != 1 || rules["a"].Guard == nil {
			t.Fatalf("rules %v; b displaced a by three gets a window", rules)
		}
	}
	r.d.setHot(udp, map[string]uint32{get("c"): 10})
	hitA()
	r.window(time.Second)
	if rules := r.d.rules(udp); len(rules) != 1 || rules["c"].Guard == nil {
		t.Fatalf("rules %v; want c, at 10/s, in a's place", rules)
	}
}

// With more than rankKeys keys, they are ranked every few windows: in
// between, newcomers only fill free room, and displace nothing.
func TestRankEvery(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxRules = 3 })
	r.a.rankKeys = 1
	r.scan()
	_, udp := r.services()
	for _, k := range []string{"a", "b", "c", "d"} {
		r.mc.set(k, k, -1)
	}
	r.d.setHot(udp, map[string]uint32{get("a"): 10, get("b"): 10})
	r.window(time.Second) // window 1 ranks
	r.d.setHot(udp, map[string]uint32{get("c"): 100})
	r.window(time.Second) // 2 keys: window 2 of every 2 admits c into the room left
	r.d.setHot(udp, map[string]uint32{get("d"): 1000})
	r.window(time.Second) // 3 keys: window 3 of every 3, no room
	if rules := r.d.rules(udp); len(rules) != 3 || rules["c"].Guard == nil || rules["d"].Guard != nil {
		t.Fatalf("rules %v between rankings; want a, b, c", rules)
	}
	r.window(time.Second) // window 4 ranks: d displaces a cold key
	if rules := r.d.rules(udp); len(rules) != 3 || rules["d"].Guard == nil || rules["c"].Guard == nil {
		t.Fatalf("rules %v after the ranking; want d in a or b's place", rules)
	}
}

// A UDP socket is attached only into a domain: without a listener, none;
// memcached that listens on TCP only is refused after a grace.
func TestDomainFirst(t *testing.T) {
	r := newRig(t, nil)
	r.finder.Set(t, r.udp)
	r.scan()
	if n := len(r.d.services); n != 0 {
		t.Fatalf("%d services without memcached's listener; want none", n)
	}
	r.finder.Set(t, r.tcp)
	r.scan()
	r.clock = r.clock.Add(noUDPGrace)
	if err := r.a.scan(); !errors.Is(err, ErrNoUDP) {
		t.Fatalf("memcached on TCP only: %v; want ErrNoUDP", err)
	}
	// Once it had UDP, a memcached restarting is waited for.
	r.finder.Set(t, r.tcp, r.udp)
	r.scan()
	r.finder.Set(t, r.tcp)
	r.scan()
	r.clock = r.clock.Add(time.Minute)
	r.scan()
}

// memcached restarts: its sockets close (santad ends their services), the
// agent forgets the domain and its keys, and the new sockets start a new
// domain that learns afresh.
func TestMemcachedRestart(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	tcp, udp := r.services()
	r.mc.set("k1", "old", -1)
	r.d.setHot(udp, map[string]uint32{get("k1"): 100})
	r.window(time.Second)
	epoch := r.d.epoch
	r.tcp.Close()
	r.udp.Close()
	r.d.mu.Lock()
	delete(r.d.services, tcp)
	delete(r.d.services, udp)
	r.d.mu.Unlock()
	r.sockets()
	r.mc.set("k1", "new", -1)
	r.scan()
	_, udp2 := r.services()
	if r.d.epoch == epoch || len(r.a.keys) != 0 {
		t.Fatalf("after the restart: epoch %d (was %d), keys %v; want a new domain and no keys", r.d.epoch, epoch, r.a.keys)
	}
	r.d.setHot(udp2, map[string]uint32{get("k1"): 10})
	r.window(time.Second)
	if e := r.d.rules(udp2)["k1"]; !equalRule(e, getRule([]byte(get("k1")), reply("k1", "new"))) || e.Guard.Epoch != r.d.epoch {
		t.Fatalf("rule %+v guard %+v; want the new value in the new domain", e.Rule, e.Guard)
	}
}

// santad restarts (or the connection breaks): the agent dials again, takes
// its services up by cookie, marks them anew (a new life: its guarded
// rules of before are dead), deletes their rules and learns again.
func TestReconnect(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.mc.set("k1", "v", -1)
	r.d.setHot(udp, map[string]uint32{get("k1"): 10})
	r.window(time.Second)
	epoch, attaches := r.d.epoch, r.d.attaches
	r.conn.Close() // broken
	r.window(time.Second)
	r.scan()
	if r.d.attaches != attaches || r.d.epoch == epoch {
		t.Fatalf("after reconnecting: %d attaches (was %d), epoch %d (was %d); want the services taken up and marked anew",
			r.d.attaches, attaches, r.d.epoch, epoch)
	}
	if rules := r.d.rules(udp); len(rules) != 0 {
		t.Fatalf("rules of the old life kept: %v", rules)
	}
	r.window(time.Second)
	if g := r.d.rules(udp)["k1"].Guard; g == nil || g.Epoch != r.d.epoch {
		t.Fatalf("k1's guard %+v; want one of the new life", g)
	}
}

// A value too large for one datagram is skipped for skip_retry.
func TestTooLarge(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.mc.set("big", "x", -1)
	r.mc.big["big"] = true
	r.d.setHot(udp, map[string]uint32{get("big"): 10})
	r.window(time.Second)
	r.window(time.Second)
	if s := r.a.snapshot(); s.skipped[skipTooLarge] != 1 || len(r.d.rules(udp)) != 0 {
		t.Fatalf("skipped %v, rules %v; want big skipped once", s.skipped, r.d.rules(udp))
	}
}

// Keys over santad's quota are refused together, not one round trip
// each, and not learned again at the next window.
func TestInstallOverTheQuota(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.d.mu.Lock()
	r.d.quota = 10
	r.d.mu.Unlock()
	hot := map[string]uint32{}
	for i := range 50 {
		key := fmt.Sprintf("k%d", i)
		r.mc.set(key, "v", -1)
		hot[get(key)] = 10
	}
	r.d.setHot(udp, hot)
	r.window(time.Second)
	r.window(time.Second)
	r.d.mu.Lock()
	adds := r.d.adds
	r.d.mu.Unlock()
	s := r.a.snapshot()
	if got := len(r.d.rules(udp)); got != 10 || len(r.a.keys) != 10 {
		t.Fatalf("santad has %d rules, the agent %d keys; want the quota's 10", got, len(r.a.keys))
	}
	// The batch refused at its 11th rule, its first 10 sent again.
	if adds != 2 || s.skipped[skipRefused] != 40 {
		t.Fatalf("%d ADD_RULES, %d keys refused; want 2 and 40", adds, s.skipped[skipRefused])
	}
}

// Run detaches memcached's services when its context ends.
func TestRunDetaches(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Scan = config.Duration(10 * time.Millisecond) })
	r.a.now = time.Now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.a.run(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r.d.mu.Lock()
		n := len(r.d.services)
		r.d.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not attached in 5 s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(r.d.services); n != 0 {
		t.Fatalf("%d services left", n)
	}
}

// A listener's connections count their writes in the domain it was in
// when they started: an agent that takes services up keeps the leader
// santad has (MEMCACHED_STATS), whatever order it finds the sockets in.
func TestKeepsTheLeader(t *testing.T) {
	r := newRig(t, nil)
	tcp2, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tcp2.Close()
	r.finder.Set(t, r.tcp, tcp2, r.udp)
	r.scan()
	// Say an agent before made the second listener the leader.
	r.d.mu.Lock()
	var listeners []uint32
	for id, s := range r.d.services {
		if s.info.Protocol == syscall.IPPROTO_TCP {
			listeners = append(listeners, id)
		}
	}
	slices.Sort(listeners)
	lead, other := listeners[1], listeners[0]
	r.d.services[lead].parser = client.Parser{Kind: client.ParserMemcached, Domain: lead}
	r.d.services[other].parser = client.Parser{Kind: client.ParserMemcached, Domain: lead}
	r.d.mu.Unlock()
	a := newAgent(r.a.cfg, r.finder, take, r.mc, r.mc)
	if err := a.scan(); err != nil {
		t.Fatal(err)
	}
	if a.leader == nil || a.leader.id != lead {
		t.Fatalf("leader %+v; want service %d, santad's", a.leader, lead)
	}
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	for id, s := range r.d.services {
		if s.parser.Domain != lead {
			t.Errorf("service %d is in domain %d; want %d", id, s.parser.Domain, lead)
		}
	}
}

// The leader's service ends while memcached's listener lives (another
// client detached it): its connections count their writes in a dead
// domain, so nothing is offloaded until the listener is gone.
func TestStranded(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	tcp, udp := r.services()
	r.d.mu.Lock()
	delete(r.d.services, tcp)
	r.d.mu.Unlock()
	r.scan()
	r.scan()
	if n := len(r.d.services); n != 0 || r.a.leader != nil {
		t.Fatalf("%d services (UDP %d detached?), leader %+v; want nothing while the listener is stranded", n, udp, r.a.leader)
	}
	// memcached restarts: new sockets, a new domain.
	r.tcp.Close()
	r.udp.Close()
	r.sockets()
	r.scan()
	r.services()
}

// The metrics and the summary line tell what the agent did.
func TestMetrics(t *testing.T) {
	r := newRig(t, nil)
	r.scan()
	_, udp := r.services()
	r.mc.set("k1", "one", -1)
	r.d.setHot(udp, map[string]uint32{get("k1"): 10, get("nokey"): 5, string(oneDatagram) + "gets k1\r\n": 5})
	r.window(time.Second)
	hs := httptest.NewServer(r.a.metricsHandler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`santa_offload_memcached_skipped_total{reason="form"} 1`,
		`santa_offload_memcached_skipped_total{reason="miss"} 1`,
		`santa_offload_memcached_installed_total 1`,
		`santa_offload_memcached_keys 1`,
		`santa_offload_memcached_attached_total 2`,
		`santa_offload_memcached_probes_total{transport="udp"} 1`, // nokey was a miss over TCP
		`santa_offload_memcached_rules{addr="` + r.udp.LocalAddr().String() + `",proto="udp",service="` + strconv.Itoa(int(udp)) + `"} 1`,
	} {
		if !strings.Contains(string(out), "\n"+want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, out)
		}
	}
}

// When popularity shifts, a key whose gets stopped gives its place to a
// newcomer of two gets a second within a few windows: the newcomer's
// evidence grows while the old key's rate decays.
func TestTopSetShift(t *testing.T) {
	r := newRig(t, func(c *Config) { c.MaxRules = 1 })
	r.scan()
	_, udp := r.services()
	for _, k := range []string{"a", "b"} {
		r.mc.set(k, k, -1)
	}
	r.d.setHot(udp, map[string]uint32{get("a"): 1})
	r.window(time.Second)
	for i := range 10 {
		r.d.setHot(udp, map[string]uint32{get("b"): 2}) // a: no more gets
		r.window(time.Second)
		if rules := r.d.rules(udp); rules["b"].Guard != nil {
			t.Logf("b in a's place after %d windows", i+1)
			return
		}
	}
	t.Fatalf("rules %v after 10 windows; want b, at 2/s, in the place of a, at 0/s", r.d.rules(udp))
}
