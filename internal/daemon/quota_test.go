package daemon

import (
	"net"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// A uid that is not an admin attaches at most its quota of services; the
// count follows DETACH, sockets closing and a restore, and one uid at its
// quota leaves others theirs.
func TestServiceQuota(t *testing.T) {
	one := uint32(1)
	s := newTestServer(t, func(c *Config) {
		c.QuotaServices = 2
		c.Quotas = map[string]Quota{
			"1001": {Services: &one},
			"1000": {Rules: 100}, // services left out: quota_services
		}
	})
	a, b, root := s.connect(t, alice, true), s.connect(t, bob, true), s.connect(t, admin, true)
	first := a.attach()
	a.attach()
	over := func(c *conn, want string) {
		t.Helper()
		before := s.serviceCount()
		c.refused(&protocol.Attach{}, syscall.EDQUOT, want, fdOf(t, udp(t)))
		if s.serviceCount() != before {
			t.Errorf("a refused ATTACH registered a service")
		}
	}
	over(a, "quota of 2 services for uid 1000 exceeded: 2 attached")
	b.attach()
	over(b, "quota of 1 services for uid 1001 exceeded: 1 attached")
	for range 3 {
		root.attach() // admins have no quota
	}

	a.ok(&protocol.Detach{ServiceID: first})
	gone := a.attach()
	over(a, "2 attached")
	s.mu.Lock()
	sv := s.st.services[model.ServiceID(gone)]
	s.mu.Unlock()
	s.dp.RemoveService(sv.ID)
	s.SocketClosed(sv.ID, sv.Info)
	a.attach()
	over(a, "2 attached")

	// A restarted santad counts the services it restores.
	j, rep, err := journal.Open(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	restarted := newTestServer(t, func(c *Config) { c.QuotaServices = 2 })
	for _, js := range rep.Services {
		restarted.dp.restorable[js.Info.Cookie] = true
	}
	if n, _ := restarted.Restore(restarted.dp, rep.Services); n != s.serviceCount() {
		t.Fatalf("restored %d services, want %d", n, s.serviceCount())
	}
	restarted.connect(t, alice, true).refused(&protocol.Attach{}, syscall.EDQUOT, "2 attached", fdOf(t, udp(t)))
}

// The rules a uid's open transactions stage to add hold their share of
// its quota, rules and bytes, against every other change: a direct
// ADD_RULES and other transactions, until the transaction ends.
func TestStagedRulesHoldTheQuota(t *testing.T) {
	begin := func(c *conn, svc uint32, rs []rule.Rule) uint32 {
		t.Helper()
		txn := c.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
		c.ok(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: rs})
		return txn
	}
	released := func(s *testServer) {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.held) != 0 {
			t.Errorf("no transaction is open, yet santad counts %v as held", s.held)
		}
	}

	t.Run("rules", func(t *testing.T) {
		s := newTestServer(t, func(c *Config) { c.QuotaRules = 5 })
		a := s.connect(t, alice, true)
		svc := a.attach()
		txn := begin(a, svc, testRules("a", 3, 8))
		e := a.refused(&protocol.AddRules{ServiceID: svc, Rules: testRules("b", 3, 8)}, syscall.EDQUOT,
			"quota of 5 rules for uid 1000 exceeded: 0 installed, 3 held by open transactions, 3 more requested")
		if e.Index != 2 {
			t.Errorf("index %d, want 2: the first rule beyond the quota", e.Index)
		}
		a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("b", 2, 8)})
		if added := a.ok(&protocol.Commit{Txn: txn}).(*protocol.CommitReply).Added; added != 3 {
			t.Errorf("COMMIT added %d rules, want 3", added)
		}
		released(s)
		a.refused(&protocol.AddRules{ServiceID: svc, Rules: testRules("c", 1, 8)}, syscall.EDQUOT, "5 installed, 1 more requested")
	})

	t.Run("bytes", func(t *testing.T) {
		s := newTestServer(t, func(c *Config) { c.QuotaRules, c.QuotaBytes = 0, 1000 })
		a := s.connect(t, alice, true)
		svc := a.attach()
		txn := begin(a, svc, testRules("a", 1, 900)) // 8 + 900 bytes
		const want = "quota of 1000 bytes for uid 1000 exceeded: 0 installed, 908 held by open transactions, 108 more requested"
		a.refused(&protocol.AddRules{ServiceID: svc, Rules: testRules("b", 1, 100)}, syscall.EDQUOT, want)
		other := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
		a.refused(&protocol.AddRules{ServiceID: svc, Txn: other, Rules: testRules("b", 1, 100)}, syscall.EDQUOT, want)
		a.ok(&protocol.Abort{Txn: txn})
		released(s)
		a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("b", 1, 100)})
	})
}

// heldOf is what uid's open transactions hold of its quota, read under the
// server's lock.
func (s *testServer) heldOf(uid uint32) usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[uid]
}

// replace is a REPLACE_RULES of rule id with r, in transaction txn.
func replace(svc, txn, id uint32, r rule.Rule) *protocol.ReplaceRules {
	return &protocol.ReplaceRules{ServiceID: svc, Txn: txn, Updates: []protocol.RuleEntry{{RuleID: id, Rule: r}}}
}

// The rules a transaction stages to replace others with hold their share
// of the quota as added ones do: a uid's open transactions, 4 on each of
// its connections, cannot each stage a replacement of the same rules, and
// santad holds no more of a uid's rules staged than its quota allows.
func TestStagedReplacementsHoldTheQuota(t *testing.T) {
	const quota = 1000
	s := newTestServer(t, func(c *Config) { c.QuotaRules, c.QuotaBytes, c.QuotaConnections = 0, quota, 4 })
	a := s.connect(t, alice, true)
	svc := a.attach()
	// One rule of 18 bytes, to be replaced with one of 908: that fits the
	// quota once.
	id := a.ok(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{testRule("a0000000", 10)}}).(*protocol.AddRulesReply).RuleIDs[0]
	big := testRule("a0000000", 900)
	const want = "quota of 1000 bytes for uid 1000 exceeded: 18 installed, 908 held by open transactions, 890 more requested"
	staged := 0
	for c := range 4 {
		conn := a
		if c > 0 {
			conn = s.connect(t, alice, true)
		}
		for range maxTxns {
			txn := conn.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
			if staged == 0 {
				conn.ok(replace(svc, txn, id, big))
				staged++
				continue
			}
			conn.refused(replace(svc, txn, id, big), syscall.EDQUOT, want)
		}
	}
	if got := s.heldOf(alice.UID); got != (usage{1, 908}) {
		t.Errorf("uid 1000's open transactions hold %+v, want the one rule of 908 bytes staged", got)
	}
	// A change outside a transaction counts them too.
	a.refused(replace(svc, 0, id, big), syscall.EDQUOT, want)
}

// What a uid's open transactions stage must fit its quota by itself,
// whatever the rules they replace would free: each transaction could
// count on freeing the same rules. So a uid at its quota may replace all
// its rules with ones no bigger, in one transaction at a time, and a uid
// above its quota as many as its quota at a time; deleting stages nothing
// and is always admitted.
func TestStagedRulesFitTheQuotaByThemselves(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.QuotaRules, c.QuotaBytes = 3, 0 })
	a, b, root := s.connect(t, alice, true), s.connect(t, alice, true), s.connect(t, admin, true)
	svc := a.attach()
	rs := testRules("a", 3, 8)
	ids := a.ok(&protocol.AddRules{ServiceID: svc, Rules: rs}).(*protocol.AddRulesReply).RuleIDs // at the quota
	all := func(txn uint32) *protocol.ReplaceRules {
		req := &protocol.ReplaceRules{ServiceID: svc, Txn: txn}
		for i, id := range ids {
			req.Updates = append(req.Updates, protocol.RuleEntry{RuleID: id, Rule: rs[i]})
		}
		return req
	}
	first := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	a.ok(all(first))
	second := b.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	e := b.refused(all(second), syscall.EDQUOT, "quota of 3 rules for uid 1000 exceeded by open transactions: 3 held, 3 more staged")
	if e.Index != 0 {
		t.Errorf("index %d, want 0: the first rule beyond the quota", e.Index)
	}
	b.ok(&protocol.DeleteRules{ServiceID: svc, Txn: second, RuleIDs: ids[:1]})
	if added := a.ok(&protocol.Commit{Txn: first}).(*protocol.CommitReply).Added; added != 0 {
		t.Errorf("COMMIT added %d rules, want 0", added)
	}
	b.ok(&protocol.Abort{Txn: second})

	// An admin's rules put alice above her quota: she may still replace
	// her rules with ones no bigger, as many at a time as her quota.
	more := testRules("b", 2, 8)
	ids = append(ids, root.ok(&protocol.AddRules{ServiceID: svc, Rules: more}).(*protocol.AddRulesReply).RuleIDs...)
	rs = append(rs, more...)
	txn := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	e = a.refused(all(txn), syscall.EDQUOT, "quota of 3 rules for uid 1000 exceeded by open transactions: 0 held, 5 more staged")
	if e.Index != 3 {
		t.Errorf("index %d, want 3: the first rule beyond the quota", e.Index)
	}
	req := all(txn)
	req.Updates = req.Updates[:3]
	a.ok(req)
	a.ok(&protocol.Commit{Txn: txn})
	if got := s.heldOf(alice.UID); got != (usage{}) {
		t.Errorf("no transaction is open, yet santad counts %+v as held", got)
	}
}

// What a transaction stages holds the quota until the transaction ends,
// however it ends: ABORT, COMMIT applied or refused, its connection
// closing, santad shutting down. A transaction whose service ended holds
// it still, until COMMIT (refused) or ABORT ends it.
func TestStagedRulesReleasedWhenTheTransactionEnds(t *testing.T) {
	type end func(t *testing.T, s *testServer, a *conn, svc, txn, id uint32)
	for _, tc := range []struct {
		name     string
		end      end
		shutdown bool // no connection is left to check the quota with
	}{
		{name: "ABORT", end: func(t *testing.T, s *testServer, a *conn, svc, txn, id uint32) {
			a.ok(&protocol.Abort{Txn: txn})
		}},
		{name: "COMMIT", end: func(t *testing.T, s *testServer, a *conn, svc, txn, id uint32) {
			a.ok(&protocol.Commit{Txn: txn})
		}},
		{name: "refused COMMIT", end: func(t *testing.T, s *testServer, a *conn, svc, txn, id uint32) {
			a.ok(&protocol.DeleteRules{ServiceID: svc, RuleIDs: []uint32{id}})
			a.refused(&protocol.Commit{Txn: txn}, syscall.ENOENT, "has no rule")
		}},
		{name: "connection closed", end: func(t *testing.T, s *testServer, a *conn, svc, txn, id uint32) {
			a.close()
		}},
		{name: "service ended", end: func(t *testing.T, s *testServer, a *conn, svc, txn, id uint32) {
			sv := s.service(svc)
			s.dp.RemoveService(sv.ID)
			s.SocketClosed(sv.ID, sv.Info)
			if got := s.heldOf(alice.UID); got != (usage{1, 908}) {
				t.Errorf("a transaction whose service ended holds %+v, want what it staged until it ends", got)
			}
			a.refused(&protocol.Commit{Txn: txn}, syscall.ENOENT, "has ended")
		}},
		{name: "santad shut down", end: func(t *testing.T, s *testServer, a *conn, svc, txn, id uint32) {
			s.closeConns()
		}, shutdown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, func(c *Config) { c.QuotaRules, c.QuotaBytes = 0, 1000 })
			a, b := s.connect(t, alice, true), s.connect(t, alice, true)
			// Two services, so that one may end and leave the other.
			svc, other := a.attach(), a.attach()
			id := a.ok(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{testRule("a0000000", 10)}}).(*protocol.AddRulesReply).RuleIDs[0]
			otherID := a.ok(&protocol.AddRules{ServiceID: other, Rules: []rule.Rule{testRule("b0000000", 10)}}).(*protocol.AddRulesReply).RuleIDs[0]
			txn := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
			a.ok(replace(svc, txn, id, testRule("a0000000", 900))) // 908 bytes held
			// 80 bytes for 18: refused while the 908 are held, admitted
			// once they are not, even with them installed.
			next := replace(other, 0, otherID, testRule("b0000000", 72))
			b.refused(next, syscall.EDQUOT, "36 installed, 908 held by open transactions, 62 more requested")

			tc.end(t, s, a, svc, txn, id)
			eventually(t, "the transaction's staged rules released", func() bool { return s.heldOf(alice.UID) == usage{} })
			if !tc.shutdown {
				b.ok(next)
			}
		})
	}
}

// A rule's bytes, as the byte quota counts them, are its pattern's and
// its reply's or, if more, those of its put processors, which santad keeps
// too: puts that overwrite one another cannot make a uid hold more than
// its quota.
func TestByteQuotaCountsPutBytes(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.QuotaRules, c.QuotaBytes = 0, 1000 })
	a := s.connect(t, alice, true)
	svc := a.attach()
	disjoint := testRule("a0000000", 100)
	disjoint.Processors = []rule.Processor{rule.Put(0, make([]byte, 50)), rule.Put(50, make([]byte, 50))}
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{disjoint}})
	if got := s.usageOf(alice.UID); got != (usage{1, 108}) {
		t.Errorf("a rule whose puts fill its reply counts %+v, want 1 rule, 8 + 100 bytes", got)
	}
	overlapping := testRule("b0000000", 100)
	overlapping.Processors = nil
	for range rule.MaxProcessors {
		overlapping.Processors = append(overlapping.Processors, rule.Put(0, make([]byte, 100)))
	}
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{overlapping}})
	if got := s.usageOf(alice.UID); got != (usage{2, 108 + 808}) {
		t.Errorf("with a rule of 8 puts of its whole reply, alice counts %+v, want 2 rules, 108 + 8 + 800 bytes", got)
	}
	overlapping.Condition.Pattern = []byte("c0000000")
	a.refused(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{overlapping}}, syscall.EDQUOT,
		"quota of 1000 bytes for uid 1000 exceeded: 916 installed, 808 more requested")
}

// tcpListener is a listening TCP socket, closed with the test.
func tcpListener(t *testing.T) *net.TCPListener {
	t.Helper()
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false) // Go's default for listeners; santad serves TCP
	ln, err := lc.Listen(t.Context(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.TCPListener)
}

// TestTCPConnectionQuota checks the connection places each uid's TCP
// listeners may take in the data plane: quota_tcp_connections, or the
// uid's own in quotas, none for an admin's; and that a reload gives every
// uid its new one, as it does the other quotas.
func TestTCPConnectionQuota(t *testing.T) {
	ten := uint32(10)
	s := newTestServer(t, func(c *Config) {
		c.Quotas = map[string]Quota{"1001": {Rules: 100, Bytes: 1 << 20, TCPConnections: &ten}}
	})
	if def := DefaultConfig().QuotaTCPConnections; def != 4096 {
		t.Errorf("default quota_tcp_connections %d, want 4096 (a sixteenth of the host's places)", def)
	}
	limitOf := func(uid uint32) uint32 {
		t.Helper()
		l, ok := s.dp.connLimit(uid)
		if !ok {
			t.Fatalf("uid %d's TCP listeners have no connection limit set", uid)
		}
		return l
	}
	a, b, ad := s.connect(t, alice, true), s.connect(t, bob, true), s.connect(t, admin, true)
	a.attach() // UDP: no connection places
	if _, ok := s.dp.connLimit(alice.UID); ok {
		t.Error("a UDP service set a connection limit")
	}
	a.ok(&protocol.Attach{}, fdOf(t, tcpListener(t)))
	b.ok(&protocol.Attach{}, fdOf(t, tcpListener(t)))
	ad.ok(&protocol.Attach{}, fdOf(t, tcpListener(t)))
	if l := limitOf(alice.UID); l != 4096 {
		t.Errorf("alice's limit %d, want quota_tcp_connections's 4096", l)
	}
	if l := limitOf(bob.UID); l != 10 {
		t.Errorf("bob's limit %d, want his quotas entry's 10", l)
	}
	if l := limitOf(admin.UID); l != 0 {
		t.Errorf("an admin's limit %d, want none (0)", l)
	}

	cfg := DefaultConfig()
	cfg.QuotaTCPConnections = 100
	cfg.Quotas = map[string]Quota{"1001": {Rules: 100, Bytes: 1 << 20}} // tcp_connections left out: the default
	if keys, err := s.Reload(cfg); err != nil || len(keys) != 0 {
		t.Fatalf("Reload: %v, restart keys %q; want neither", err, keys)
	}
	if l := limitOf(alice.UID); l != 100 {
		t.Errorf("after the reload alice's limit %d, want 100", l)
	}
	if l := limitOf(bob.UID); l != 100 {
		t.Errorf("after the reload bob's limit %d, want the default 100", l)
	}
	if l := limitOf(admin.UID); l != 0 {
		t.Errorf("after the reload an admin's limit %d, want none (0)", l)
	}
}
