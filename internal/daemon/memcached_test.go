package daemon

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// memcachedDomain attaches a service of c's and makes it start a domain.
func memcachedDomain(c *conn) uint32 {
	c.t.Helper()
	id := c.attach()
	c.ok(&protocol.Parser{ServiceID: id, Kind: protocol.ParserMemcached, Domain: id})
	return id
}

// PARSER: the owner of both services of a domain (or an admin) only;
// GENERATION and MEMCACHED_STATS of memcached services of the client's.
func TestParserAndGeneration(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connectV2(t, alice)
	udpID, tcpID := a.attach(), a.attach()

	a.refused(&protocol.Generation{ServiceID: udpID, Key: []byte("k1")}, syscall.EINVAL, "not a memcached service: PARSER marks it one")
	a.refused(&protocol.MemcachedStats{ServiceID: udpID}, syscall.EINVAL, "not a memcached service")
	a.refused(&protocol.Parser{ServiceID: udpID, Kind: 2, Domain: udpID}, syscall.EINVAL, "parser kind 2")
	a.refused(&protocol.Parser{ServiceID: udpID, Kind: protocol.ParserNone, Domain: 7}, syscall.EINVAL, "domain is 7; a service without a parser has none (0)")
	a.refused(&protocol.Parser{ServiceID: tcpID, Kind: protocol.ParserMemcached, Domain: udpID}, syscall.EINVAL,
		"service "+strconv.Itoa(int(udpID))+" has not started a domain")
	a.refused(&protocol.Parser{ServiceID: tcpID, Kind: protocol.ParserMemcached, Domain: 999}, syscall.ENOENT, "no service 999")
	a.ok(&protocol.Parser{ServiceID: udpID, Kind: protocol.ParserMemcached, Domain: udpID})
	a.ok(&protocol.Parser{ServiceID: tcpID, Kind: protocol.ParserMemcached, Domain: udpID})

	// Another uid may not mark alice's services, nor join her domain.
	b := s.connectV2(t, bob)
	bobs := b.attach()
	b.refused(&protocol.Parser{ServiceID: udpID, Kind: protocol.ParserMemcached, Domain: udpID}, syscall.EPERM, "belongs to uid 1000")
	b.refused(&protocol.Parser{ServiceID: bobs, Kind: protocol.ParserMemcached, Domain: udpID}, syscall.EPERM,
		"domain "+strconv.Itoa(int(udpID))+" is a service of uid 1000, not of uid 1001")
	b.refused(&protocol.Generation{ServiceID: tcpID, Key: []byte("k1")}, syscall.EPERM, "belongs to uid 1000")
	b.refused(&protocol.MemcachedStats{ServiceID: tcpID}, syscall.EPERM, "belongs to uid 1000")
	// An admin administers both.
	s.connectV2(t, admin).ok(&protocol.Parser{ServiceID: bobs, Kind: protocol.ParserMemcached, Domain: udpID})

	got := a.ok(&protocol.Generation{ServiceID: tcpID, Key: []byte("k1")}).(*protocol.GenerationReply)
	if want := (&protocol.GenerationReply{Gen: 7, DomainGen: 3, Epoch: 1}); !reflect.DeepEqual(got, want) {
		t.Errorf("GENERATION gives %+v, want %+v", got, want)
	}
	for _, key := range []string{"", "a key", "k\x7f", strings.Repeat("k", model.MaxMemcachedKey+1)} {
		a.refused(&protocol.Generation{ServiceID: tcpID, Key: []byte(key)}, syscall.EINVAL, "key: a memcached key")
	}
	st := a.ok(&protocol.MemcachedStats{ServiceID: tcpID}).(*protocol.MemcachedStatsReply)
	if st.Domain != udpID || st.Writes != uint64(udpID) || st.GuardStale != 2 {
		t.Errorf("MEMCACHED_STATS of a joined service gives %+v, want domain %d's", st, udpID)
	}

	// Starting the domain again is a new life.
	a.ok(&protocol.Parser{ServiceID: udpID, Kind: protocol.ParserMemcached, Domain: udpID})
	if g := a.ok(&protocol.Generation{ServiceID: udpID, Key: []byte("k1")}).(*protocol.GenerationReply); g.Epoch != 2 {
		t.Errorf("GENERATION after a restart of the domain gives life %d, want 2", g.Epoch)
	}
	a.ok(&protocol.Parser{ServiceID: tcpID})
	a.refused(&protocol.Generation{ServiceID: tcpID, Key: []byte("k1")}, syscall.EINVAL, "not a memcached service")
}

// Guarded rules: memcached services only, keys memcached takes, the
// domain's life; the deadline counts from when the batch is applied.
func TestGuardedRules(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connectV2(t, alice)
	plain, mc := a.attach(), memcachedDomain(a)
	guard := &protocol.Guard{Key: []byte("k1"), Gen: 7, DomainGen: 3, Epoch: 1, ExpiresInMS: 60000}
	rs := testRules("g", 3, 8)

	e := a.refused(&protocol.AddRules{ServiceID: plain, Rules: rs[:2], Guards: []*protocol.Guard{nil, guard}}, syscall.EINVAL,
		"rule 1 of the batch has a guard, and service "+strconv.Itoa(int(plain))+" is not a memcached service")
	if e.Index != 1 {
		t.Errorf("index %d, want 1", e.Index)
	}
	bad := *guard
	bad.Key = []byte("two words")
	a.refused(&protocol.AddRules{ServiceID: mc, Rules: rs[:1], Guards: []*protocol.Guard{&bad}}, syscall.EINVAL, "the guard of rule 0 of the batch: a memcached key")
	stale := *guard
	stale.Epoch = 5
	a.refused(&protocol.AddRules{ServiceID: mc, Rules: rs[:1], Guards: []*protocol.Guard{&stale}}, syscall.ESTALE, "life 5")

	before := time.Now()
	domainOnly := &protocol.Guard{Epoch: 1}
	ids := a.ok(&protocol.AddRules{ServiceID: mc, Rules: rs, Guards: []*protocol.Guard{nil, guard, domainOnly}}).(*protocol.AddRulesReply).RuleIDs
	gs := s.dp.guardsOf(model.ServiceID(mc))
	g1 := gs[model.RuleID(ids[1])]
	if len(gs) != 2 || g1 == nil || string(g1.Key) != "k1" || g1.At != (model.Generation{Gen: 7, DomainGen: 3, Epoch: 1}) ||
		g1.Expires.Before(before.Add(time.Minute)) || g1.Expires.After(time.Now().Add(time.Minute)) {
		t.Fatalf("the data plane runs guards %+v", gs)
	}
	if g2 := gs[model.RuleID(ids[2])]; g2.Key != nil || !g2.Expires.IsZero() {
		t.Errorf("a domain guard without a deadline runs as %+v", g2)
	}

	// Listed in version 2 with the time left; version 1 cannot carry it.
	page := a.ok(&protocol.ListRules{ServiceID: mc}).(*protocol.ListRulesReply)
	if len(page.Rules) != 3 || page.Rules[0].Guard != nil || page.Rules[2].Guard == nil || page.Rules[2].Guard.ExpiresInMS != 0 {
		t.Fatalf("LIST_RULES gives %+v", page.Rules)
	}
	if l := page.Rules[1].Guard; l == nil || !bytes.Equal(l.Key, guard.Key) || l.Gen != 7 || l.ExpiresInMS > 60000 || l.ExpiresInMS < 59000 {
		t.Errorf("LIST_RULES shows the guard %+v", l)
	}
	v1 := s.connectV1(t, alice)
	if p := v1.ok(&protocol.ListRules{ServiceID: mc}).(*protocol.ListRulesReply); len(p.Rules) != 1 || p.Next != ids[1] {
		t.Errorf("a version 1 page gives %+v, want rule %d and next %d", p, ids[0], ids[1])
	}
	v1.refused(&protocol.ListRules{ServiceID: mc, Start: ids[1]}, syscall.EPROTONOSUPPORT, "has a guard, which protocol version 1 cannot carry")

	// In a transaction the deadline counts from COMMIT.
	txn := a.ok(&protocol.Begin{ServiceID: mc}).(*protocol.BeginReply).Txn
	soon := &protocol.Guard{Key: []byte("k2"), Epoch: 1, ExpiresInMS: 1000}
	staged := a.ok(&protocol.AddRules{ServiceID: mc, Txn: txn, Rules: []rule.Rule{testRule("t", 8)}, Guards: []*protocol.Guard{soon}}).(*protocol.AddRulesReply).RuleIDs
	a.ok(&protocol.ReplaceRules{ServiceID: mc, Txn: txn, Updates: []protocol.RuleEntry{{RuleID: ids[0], Rule: rs[0], Guard: soon}}})
	a.ok(&protocol.AddRules{ServiceID: mc, Txn: txn, Rules: []rule.Rule{testRule("u", 8)}})
	time.Sleep(50 * time.Millisecond)
	committed := time.Now()
	a.ok(&protocol.Commit{Txn: txn})
	gs = s.dp.guardsOf(model.ServiceID(mc))
	for _, id := range []uint32{staged[0], ids[0]} {
		if g := gs[model.RuleID(id)]; g == nil || string(g.Key) != "k2" || g.Expires.Before(committed.Add(time.Second)) {
			t.Errorf("rule %d committed with guard %+v, want k2's expiring a second after the commit", id, g)
		}
	}
	if len(gs) != 4 {
		t.Errorf("%d guarded rules after the commit, want 4", len(gs))
	}
}

// Guarded rules are never journaled: a rule that gains a guard leaves the
// journal, one that loses it enters it, and a restarted santad restores
// the unguarded rules only.
func TestGuardsAreNotJournaled(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connectV2(t, alice)
	mc := memcachedDomain(a)
	guard := &protocol.Guard{Key: []byte("k"), Epoch: 1}
	rs := testRules("j", 6, 8)
	ids := a.ok(&protocol.AddRules{ServiceID: mc, Rules: rs, Guards: []*protocol.Guard{nil, nil, nil, nil, guard, guard}}).(*protocol.AddRulesReply).RuleIDs
	a.ok(&protocol.ReplaceRules{ServiceID: mc, Updates: []protocol.RuleEntry{
		{RuleID: ids[0], Rule: rs[0], Guard: guard}, // gains one
		{RuleID: ids[1], Rule: testRule("jj", 9)},   // stays unguarded
		{RuleID: ids[4], Rule: testRule("jg", 10)},  // loses it
	}})
	a.ok(&protocol.DeleteRules{ServiceID: mc, RuleIDs: []uint32{ids[2], ids[5]}})
	want := map[model.RuleID]rule.Rule{
		model.RuleID(ids[1]): testRule("jj", 9), model.RuleID(ids[3]): rs[3], model.RuleID(ids[4]): testRule("jg", 10)}
	if n := len(s.service(mc).Rules); n != 4 {
		t.Fatalf("the state holds %d rules, want 4", n)
	}

	replayed := func(what string) map[model.ServiceID]*journal.Service {
		t.Helper()
		j, rep, err := journal.Open(s.dir)
		if err != nil {
			t.Fatal(err)
		}
		j.Close()
		if got := rep.Services[model.ServiceID(mc)].Rules; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s replays %v, want %v", what, got, want)
		}
		return rep.Services
	}
	replayed("the journal")
	if err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	saved := replayed("a snapshot")
	wantSize := int64(journal.ServiceSize)
	for _, r := range want {
		wantSize += journal.RuleSize(r)
	}
	if _, snapshot := s.journalSizes(); snapshot != wantSize {
		t.Errorf("the state counts a snapshot of %d bytes, want %d: its unguarded rules only", snapshot, wantSize)
	}

	restarted := newTestServer(t, nil)
	restarted.dp.restorable[s.service(mc).Info.Cookie] = true
	if n, r := restarted.Restore(restarted.dp, saved); n != 1 || r != 3 {
		t.Fatalf("restored %d services, %d rules; want 1, 3", n, r)
	}
	if gs := restarted.dp.guardsOf(model.ServiceID(mc)); len(gs) != 0 {
		t.Errorf("restored guards %v", gs)
	}
	page := restarted.connectV2(t, alice).ok(&protocol.ListRules{ServiceID: mc}).(*protocol.ListRulesReply)
	for _, e := range page.Rules {
		if e.Guard != nil {
			t.Errorf("restored rule %d lists guard %+v", e.RuleID, e.Guard)
		}
	}
}

// The metrics hold each domain's counters, by the service that started it.
func TestMemcachedMetrics(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connectV2(t, alice)
	a.attach()
	domain := memcachedDomain(a)
	joined := a.attach()
	a.ok(&protocol.Parser{ServiceID: joined, Kind: protocol.ParserMemcached, Domain: domain})
	out := s.scrape(t)
	d := strconv.Itoa(int(domain))
	for _, want := range []string{
		"\nsanta_memcached_writes_total{domain=\"" + d + "\"} " + d + "\n",
		"\nsanta_memcached_lost_total{domain=\"" + d + "\"} 0\n",
		"\nsanta_memcached_udp_timed_out_total{domain=\"" + d + "\"} 3\n",
		"\nsanta_memcached_guard_refused_total{domain=\"" + d + "\",reason=\"stale\"} 2\n",
		"\nsanta_memcached_guard_refused_total{domain=\"" + d + "\",reason=\"expired\"} 0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the metrics", strings.TrimSpace(want))
		}
	}
	if n := strings.Count(out, "\nsanta_memcached_writes_total{"); n != 1 {
		t.Errorf("%d domains in the metrics, want 1:\n%s", n, out)
	}
}
