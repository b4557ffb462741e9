package daemon

import (
	"context"
	"net"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// A rule the service's protocol cannot serve is refused with its index in
// the request, however the request reaches the service: a UDP reply must
// fit one datagram (1472 bytes), a TCP one need not.
func TestRuleLimitsOfTheService(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	installed := a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("ok", 2, 8)}).(*protocol.AddRulesReply).RuleIDs
	tooLong := func(n, bad int) []rule.Rule {
		rs := testRules("new", n, rule.MaxUDPReply)
		rs[bad].ReplyLen = rule.MaxUDPReply + 1
		return rs
	}
	txn := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	for _, tc := range []struct {
		name  string
		req   protocol.Body
		index uint32
	}{
		{"ADD_RULES, first", &protocol.AddRules{ServiceID: svc, Rules: tooLong(1, 0)}, 0},
		{"ADD_RULES, third", &protocol.AddRules{ServiceID: svc, Rules: tooLong(4, 2)}, 2},
		{"REPLACE_RULES", &protocol.ReplaceRules{ServiceID: svc, Updates: []protocol.RuleEntry{
			{RuleID: installed[0], Rule: testRule("ok", 8)},
			{RuleID: installed[1], Rule: tooLong(1, 0)[0]},
		}}, 1},
		{"ADD_RULES in a transaction", &protocol.AddRules{ServiceID: svc, Txn: txn, Rules: tooLong(2, 1)}, 1},
	} {
		e := a.refused(tc.req, syscall.EINVAL, "reply length is 1473 bytes; the limit is 1472")
		if e.Index != tc.index {
			t.Errorf("%s: error index %d, want %d", tc.name, e.Index, tc.index)
		}
	}

	var lc net.ListenConfig
	lc.SetMultipathTCP(false) // Go's default, which santad refuses
	l, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tcp := a.ok(&protocol.Attach{}, fdOf(t, l.(*net.TCPListener))).(*protocol.ServiceInfo).ServiceID
	a.ok(&protocol.AddRules{ServiceID: tcp, Rules: tooLong(1, 0)})
}

// A rule whose condition offset would be one distinct offset too many for
// its service is refused with its index; offsets that the same change
// frees (the last rule at an offset replaced or deleted) make room, in a
// transaction too.
func TestDistinctOffsetsIndex(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	at := func(name string, off int) rule.Rule {
		r := testRule(name, 8)
		r.Condition.Offset = uint16(off)
		return r
	}
	var first []rule.Rule
	for off := range rule.MaxRegions {
		first = append(first, at("a", off*10))
	}
	ids := a.ok(&protocol.AddRules{ServiceID: svc, Rules: first}).(*protocol.AddRulesReply).RuleIDs
	index := func(req protocol.Body, want uint32) {
		t.Helper()
		e := a.refused(req, syscall.EINVAL, "would make 9 distinct condition offsets in service 0; the limit is 8")
		if e.Index != want {
			t.Errorf("%v: index %d, want %d: the rule of the ninth offset", req.Type(), e.Index, want)
		}
	}
	index(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{at("b", 0), at("b", 100)}}, 1)
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{at("x", 20)}})
	// Offset 20 has two rules: replacing one frees nothing. Offset 0 has
	// one: replacing it frees a place.
	index(&protocol.ReplaceRules{ServiceID: svc, Updates: []protocol.RuleEntry{
		{RuleID: ids[0], Rule: at("c", 0)}, {RuleID: ids[2], Rule: at("c", 300)}}}, 1)
	a.ok(&protocol.ReplaceRules{ServiceID: svc, Updates: []protocol.RuleEntry{{RuleID: ids[0], Rule: at("c", 100)}}})

	txn := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	index(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: []rule.Rule{at("d", 300)}}, 0)
	a.ok(&protocol.DeleteRules{ServiceID: svc, Txn: txn, RuleIDs: ids[1:2]}) // the only rule at offset 10
	a.ok(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: []rule.Rule{at("d", 300)}})
	index(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: []rule.Rule{at("e", 300), at("e", 400)}}, 1)
	a.ok(&protocol.Commit{Txn: txn})
}
