package daemon

import (
	"context"
	"net"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/rules"
)

// A rule the service's protocol cannot serve is refused with its index in
// the request, however the request reaches the service: a UDP reply must
// fit one datagram (1472 bytes), a TCP one need not.
func TestRuleLimitsOfTheService(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	installed := a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("ok", 2, 8)}).(*protocol.AddRulesReply).RuleIDs
	tooLong := func(n, bad int) []rules.Rule {
		rs := testRules("new", n, rules.MaxUDPReply)
		rs[bad].ReplyLen = rules.MaxUDPReply + 1
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
