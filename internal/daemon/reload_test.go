package daemon

import (
	"slices"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

// TestReloadQuotas checks that a reload's quotas hold for the requests
// after it, that HELLO tells them, and that what a uid holds stays.
func TestReloadQuotas(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.QuotaRules = 5 })
	a := s.connect(t, alice, true)
	svc := a.attach()
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("a", 5, 8)})
	a.refused(&protocol.AddRules{ServiceID: svc, Rules: testRules("b", 1, 8)}, syscall.EDQUOT, "quota of 5 rules for uid 1000 exceeded")

	cfg := DefaultConfig()
	cfg.QuotaRules = 8
	if keys, err := s.Reload(cfg); err != nil || len(keys) != 0 {
		t.Fatalf("Reload: %v, restart keys %q; want neither", err, keys)
	}
	if q := a.ok(&protocol.Hello{MinVersion: protocol.MinVersion, MaxVersion: protocol.MaxVersion}).(*protocol.HelloReply).QuotaRules; q != 8 {
		t.Errorf("HELLO after the reload tells a quota of %d rules, want 8", q)
	}
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("b", 3, 8)})
	a.refused(&protocol.AddRules{ServiceID: svc, Rules: testRules("c", 1, 8)}, syscall.EDQUOT, "quota of 8 rules for uid 1000 exceeded: 8 installed")

	cfg.QuotaRules = 2
	if _, err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if n := s.usageOf(alice.UID).rules; n != 8 {
		t.Errorf("after lowering the quota alice holds %d rules, want her 8 kept", n)
	}
	a.refused(&protocol.AddRules{ServiceID: svc, Rules: testRules("c", 1, 8)}, syscall.EDQUOT, "quota of 2 rules for uid 1000 exceeded: 8 installed")
	// Over the quota, she may still replace a rule with one no bigger,
	// and delete.
	a.ok(&protocol.ReplaceRules{ServiceID: svc, Updates: []protocol.RuleEntry{{RuleID: 1, Rule: testRule("d", 8)}}})
	a.ok(&protocol.DeleteRules{ServiceID: svc, RuleIDs: []uint32{0}})
}

// TestReloadConnectionsAndAdmins checks the two keys read outside the
// request path: the connection quota and the admin group.
func TestReloadConnectionsAndAdmins(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.QuotaConnections = 0 })
	cfg := DefaultConfig()
	cfg.QuotaConnections, cfg.AdminGroup = 1, "0"
	if _, err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if q, _ := s.admitConnection(alice.UID); q != 0 {
		t.Fatalf("alice's first connection refused, quota %d", q)
	}
	if q, _ := s.admitConnection(alice.UID); q != 1 {
		t.Errorf("alice's second connection: quota %d, want refused at the reloaded quota of 1", q)
	}
	if g := s.adminGroup.Load(); g != 0 {
		t.Errorf("admin group %d after reloading admin_group \"0\", want gid 0", g)
	}
}

// TestReloadRefused checks that a configuration santad cannot run with
// changes nothing, and that keys set up at start are named, not applied.
func TestReloadRefused(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.QuotaRules = 5 })
	for name, edit := range map[string]func(*Config){
		"socket_mode":     func(c *Config) { c.SocketMode = "999" },
		"quotas key":      func(c *Config) { c.Quotas = map[string]Quota{"alice": {}} },
		"admin_group":     func(c *Config) { c.AdminGroup = "no-such-group-santa-test" },
		"max_rules":       func(c *Config) { c.MaxRules = 0 },
		"empty state_dir": func(c *Config) { c.StateDir = "" },
	} {
		cfg := DefaultConfig()
		cfg.QuotaRules = 1
		edit(&cfg)
		if _, err := s.Reload(cfg); err == nil {
			t.Errorf("%s: a reload santad cannot run with was accepted", name)
		}
	}
	a := s.connect(t, alice, true)
	svc := a.attach()
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("a", 5, 8)}) // still 5, not 1

	cfg := DefaultConfig()
	cfg.MaxRules, cfg.Socket, cfg.Interfaces, cfg.QuotaRules = 10, "/run/other.sock", []string{"lo"}, 5
	want := []string{"socket", "interfaces", "max_rules"}
	for range 2 { // and again: the running values stay
		if keys, err := s.Reload(cfg); err != nil || !slices.Equal(keys, want) {
			t.Errorf("Reload: restart keys %q, %v; want %q", keys, err, want)
		}
	}
	if s.capacity != DefaultConfig().MaxRules {
		t.Errorf("capacity %d after a reload, want the running %d", s.capacity, DefaultConfig().MaxRules)
	}
}
