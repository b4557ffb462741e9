package daemon

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// A client of version 1 is served as before: a rule's flags must be 0, and
// a rule with a length condition, which version 1 cannot carry, is never
// listed without it: a page ends before such a rule, and a page that
// would start with it is refused, naming it.
func TestVersion1Client(t *testing.T) {
	s := newTestServer(t, nil)
	v2 := s.connect(t, alice, true)
	svc := v2.attach()
	exact := testRule("b", 8)
	exact.Condition = rule.ExactLength(exact.Condition, 20)
	rs := []rule.Rule{testRule("a", 8), exact, testRule("c", 8)}
	ids := v2.ok(&protocol.AddRules{ServiceID: svc, Rules: rs}).(*protocol.AddRulesReply).RuleIDs

	v1 := s.connectV1(t, alice)
	if v1.version != protocol.Version1 {
		t.Fatalf("HELLO of versions 1 to 1 agrees on %d", v1.version)
	}
	page := v1.ok(&protocol.ListRules{ServiceID: svc}).(*protocol.ListRulesReply)
	if len(page.Rules) != 1 || page.Rules[0].RuleID != ids[0] || page.Next != ids[1] {
		t.Fatalf("version 1's first page: %+v; want rule %d, then next %d", page, ids[0], ids[1])
	}
	v1.refused(&protocol.ListRules{ServiceID: svc, Start: ids[1]}, syscall.EPROTONOSUPPORT,
		fmt.Sprintf("rule %d of service %d has a length condition (request length 20), which protocol version 1 cannot carry: list it over version 2", ids[1], svc))
	page = v1.ok(&protocol.ListRules{ServiceID: svc, Start: ids[1] + 1}).(*protocol.ListRulesReply)
	if len(page.Rules) != 1 || page.Rules[0].RuleID != ids[2] || page.Next != protocol.LastPage {
		t.Fatalf("version 1's page after the rule: %+v", page)
	}
	if c := v1.ok(&protocol.RuleStats{ServiceID: svc}).(*protocol.RuleStatsReply).Counters; len(c) != 3 {
		t.Errorf("version 1's RULE_STATS lists %d rules; want all 3", len(c))
	}
	page = v2.ok(&protocol.ListRules{ServiceID: svc}).(*protocol.ListRulesReply)
	if len(page.Rules) != 3 || page.Rules[1].Rule.Condition.MinLen != 20 || page.Rules[1].Rule.Condition.MaxLen != 20 {
		t.Fatalf("version 2 lists %+v", page.Rules)
	}

	// A length condition sent in version 1 is a rule with flags 1: EINVAL,
	// as it always was, and the connection stays.
	msg, err := protocol.Encode(protocol.Version2, 99, &protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{exact}})
	if err != nil {
		t.Fatal(err)
	}
	msg[4] = protocol.Version1
	v1.send(msg)
	if e, ok := v1.recv().(*protocol.Error); !ok || e.Code != syscall.EINVAL || e.Message != "rules[0].flags: is 1; it must be 0" {
		t.Fatalf("a version-1 rule with flags 1 gives %v", e)
	}
	v1.ok(&protocol.Status{})
}

// After HELLO every message carries the version it agreed on; one in
// another version breaks the protocol and ends the connection.
func TestMessageInAnotherVersion(t *testing.T) {
	s := newTestServer(t, nil)
	for _, tc := range []struct {
		name string
		conn func() *conn
		send uint16
	}{
		{"version 1 on a version-2 connection", func() *conn { return s.connect(t, alice, true) }, protocol.Version1},
		{"version 2 on a version-1 connection", func() *conn { return s.connectV1(t, alice) }, protocol.Version2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.conn()
			agreed := c.version
			msg, err := protocol.Encode(tc.send, 7, &protocol.Status{})
			if err != nil {
				t.Fatal(err)
			}
			c.send(msg)
			e, ok := c.recv().(*protocol.Error) // recv checks that it is in the agreed version
			want := fmt.Sprintf("STATUS in protocol version %d; HELLO agreed on version %d", tc.send, agreed)
			if !ok || e.Code != syscall.EPROTO || e.Message != want {
				t.Fatalf("got %v; want EPROTO %q", e, want)
			}
			c.closed()
		})
	}
}

// HELLO itself may come in any version this side speaks, and a later one
// agrees anew.
func TestHelloAgreesAnew(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.connect(t, alice, false)
	msg, err := protocol.Encode(protocol.Version2, 1, &protocol.Hello{MinVersion: 1, MaxVersion: 2})
	if err != nil {
		t.Fatal(err)
	}
	c.send(msg)
	if r, ok := c.recv().(*protocol.HelloReply); !ok || r.Version != 2 {
		t.Fatalf("HELLO sent in version 2 gives %+v", r)
	}
	if r := c.ok(&protocol.Hello{MinVersion: 1, MaxVersion: 1}).(*protocol.HelloReply); r.Version != 1 {
		t.Fatalf("a second HELLO of version 1 only agrees on %d", r.Version)
	}
	c.ok(&protocol.Status{}) // in version 1 now
}
