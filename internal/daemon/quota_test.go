package daemon

import (
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
