package daemon

import (
	"fmt"
	"maps"
	"net"
	"os"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

func TestHello(t *testing.T) {
	s := newTestServer(t, func(c *Config) {
		c.QuotaRules = 10
		c.Quotas = map[string]Quota{"1001": {Rules: 7, Bytes: 99}}
	})
	for _, tc := range []struct {
		peer Peer
		want protocol.HelloReply
	}{
		{alice, protocol.HelloReply{Version: protocol.MaxVersion, UID: 1000, GID: 100, PID: 11, QuotaRules: 10, QuotaBytes: 64 << 20}},
		{bob, protocol.HelloReply{Version: protocol.MaxVersion, UID: 1001, GID: 100, PID: 12, QuotaRules: 7, QuotaBytes: 99}},
		{admin, protocol.HelloReply{Version: protocol.MaxVersion, UID: 1002, GID: 100, PID: 13, Admin: true}},
	} {
		got := *s.connect(t, tc.peer, false).ok(&protocol.Hello{MinVersion: 1, MaxVersion: protocol.MaxVersion}).(*protocol.HelloReply)
		tc.want.Daemon = s.version
		if got != tc.want {
			t.Errorf("HELLO of %+v = %+v, want %+v", tc.peer, got, tc.want)
		}
	}
	c := s.connect(t, alice, false)
	c.refused(&protocol.Hello{MinVersion: 8, MaxVersion: 9}, syscall.EPROTONOSUPPORT, "the client speaks versions 8 to 9; santad speaks versions 1 to 7")
	c.refused(&protocol.Hello{MinVersion: 2, MaxVersion: 1}, syscall.EPROTONOSUPPORT, "the client speaks versions 2 to 1")
	// Still open, still without HELLO: anything else now closes it.
	c.refused(&protocol.Status{}, syscall.EPROTO, "the first request must be HELLO, not STATUS")
	c.closed()
}

// What a client sends wrong ends at worst its own connection, never
// another's; EPROTO and EMSGSIZE close it, other errors do not.
func TestBadMessages(t *testing.T) {
	s := newTestServer(t, nil)
	other := s.connect(t, alice, true)
	hello, _ := protocol.Encode(1, 1, &protocol.Hello{MinVersion: 1, MaxVersion: 1})
	detach, _ := protocol.Encode(1, 1, &protocol.Detach{ServiceID: 1})
	reply, _ := protocol.Encode(1, 1, &protocol.DetachReply{})
	withLen := func(msg []byte, n int) []byte {
		msg = append([]byte(nil), msg...)
		msg[8] = byte(n)
		return msg
	}
	for _, tc := range []struct {
		name  string
		msg   []byte
		code  syscall.Errno
		close bool
	}{
		{"garbage", []byte("GET / HTTP/1.0\r\n\r\n"), syscall.EPROTO, true},
		{"short", []byte{1, 2, 3}, syscall.EPROTO, true},
		{"length field", withLen(detach, 30), syscall.EPROTO, true},
		{"truncated body", withLen(detach[:18], 18), syscall.EBADMSG, false},
		{"left over", withLen(append(detach, 0), 21), syscall.EBADMSG, false},
		{"a reply", reply, syscall.EPROTO, true},
		{"oversized", append(detach, make([]byte, protocol.MaxMessage)...), syscall.EMSGSIZE, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.connect(t, alice, false)
			c.send(hello)
			c.recv()
			c.send(tc.msg)
			e, ok := c.recv().(*protocol.Error)
			if !ok || e.Code != tc.code {
				t.Fatalf("reply %v, want %v", e, tc.code)
			}
			t.Logf("%s: %v", tc.name, e)
			if tc.close {
				c.closed()
			} else {
				c.ok(&protocol.Status{})
			}
			other.ok(&protocol.Status{})
		})
	}
}

// santad keeps no descriptor a client sends: not the attached socket, not
// extra ones, not those sent with other requests.
func TestDescriptors(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.connect(t, alice, true)
	u1, u2 := fdOf(t, udp(t)), fdOf(t, udp(t))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	unbound, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(unbound)

	before := openFDs(t)
	c.refused(&protocol.Attach{}, syscall.EBADF, "carries 0 file descriptors")
	c.refused(&protocol.Attach{}, syscall.EBADF, "carries 2 file descriptors", u1, u2)
	c.refused(&protocol.Attach{}, syscall.ENOTSOCK, "not a socket", int(r.Fd()))
	c.refused(&protocol.Attach{}, syscall.EOPNOTSUPP, "UDP", fdOf(t, tcp.(*net.TCPListener)))
	c.refused(&protocol.Attach{}, syscall.EINVAL, "not bound", unbound)
	c.refused(&protocol.Attach{Flags: 1}, syscall.EINVAL, "flags", u1)
	c.ok(&protocol.Status{}, u1, u2, int(w.Fd()))
	c.ok(&protocol.Attach{}, u1)
	c.refused(&protocol.Attach{}, syscall.EEXIST, "already registered", u1)
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before, %d after: santad kept some", before, after)
	}
}

func TestOwnership(t *testing.T) {
	s := newTestServer(t, nil)
	a, b, root := s.connect(t, alice, true), s.connect(t, bob, true), s.connect(t, admin, true)
	svc := a.attach()
	ids := a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("a", 2, 8)}).(*protocol.AddRulesReply).RuleIDs
	mine := b.attach()

	for _, req := range []protocol.Body{
		&protocol.Detach{ServiceID: svc},
		&protocol.AddRules{ServiceID: svc, Rules: testRules("b", 1, 8)},
		&protocol.ReplaceRules{ServiceID: svc, Updates: []protocol.RuleEntry{{RuleID: ids[0], Rule: testRule("b", 8)}}},
		&protocol.DeleteRules{ServiceID: svc, RuleIDs: ids[:1]},
		&protocol.Begin{ServiceID: svc},
		&protocol.ListRules{ServiceID: svc},
		&protocol.RuleStats{ServiceID: svc},
		&protocol.ServiceStats{ServiceID: svc},
	} {
		b.refused(req, syscall.EPERM, "belongs to uid 1000, not to uid 1001")
	}
	// Nor through a transaction on a service of its own.
	txn := b.ok(&protocol.Begin{ServiceID: mine}).(*protocol.BeginReply).Txn
	b.refused(&protocol.DeleteRules{ServiceID: mine, Txn: txn, RuleIDs: ids[:1]}, syscall.ENOENT, "has no rule")
	b.refused(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: testRules("b", 1, 8)}, syscall.EINVAL, "not on service")
	b.refused(&protocol.Detach{ServiceID: 4242}, syscall.ENOENT, "no service 4242")

	list := func(c *conn) []uint32 {
		var out []uint32
		for _, si := range c.ok(&protocol.ListServices{}).(*protocol.ListServicesReply).Services {
			out = append(out, si.ServiceID)
		}
		return out
	}
	if got := list(a); !reflect.DeepEqual(got, []uint32{svc}) {
		t.Errorf("alice lists %v, want her own %d", got, svc)
	}
	if got := list(root); !reflect.DeepEqual(got, []uint32{svc, mine}) {
		t.Errorf("the admin lists %v, want %d and %d", got, svc, mine)
	}
	root.ok(&protocol.DeleteRules{ServiceID: svc, RuleIDs: ids[:1]})
	root.ok(&protocol.Detach{ServiceID: mine})
	if got := list(b); len(got) != 0 {
		t.Errorf("bob lists %v after the admin detached his service", got)
	}
}

func TestQuotas(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.QuotaRules, c.QuotaBytes = 10, 1000 })
	a, root := s.connect(t, alice, true), s.connect(t, admin, true)
	svc := a.attach()
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("a", 4, 8)}) // 4 rules, 4 × 16 bytes

	e := a.refused(&protocol.AddRules{ServiceID: svc, Rules: testRules("b", 10, 8)}, syscall.EDQUOT,
		"quota of 10 rules for uid 1000 exceeded: 4 installed, 10 more requested")
	if e.Index != 6 {
		t.Errorf("index %d, want 6: the first rule beyond the quota", e.Index)
	}
	a.refused(&protocol.AddRules{ServiceID: svc, Rules: testRules("c", 1, 1000)}, syscall.EDQUOT,
		"quota of 1000 bytes for uid 1000 exceeded: 64 installed, 1008 more requested")

	// A transaction counts what it holds with what is installed.
	txn := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	a.ok(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: testRules("d", 5, 8)})
	a.refused(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: testRules("e", 2, 8)}, syscall.EDQUOT,
		"4 installed, 7 more requested")
	// The admin has no quota, but what it adds counts against the owner's.
	root.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("f", 3, 8)})
	a.refused(&protocol.Commit{Txn: txn}, syscall.EDQUOT, "7 installed, 5 more requested")
	a.refused(&protocol.Commit{Txn: txn}, syscall.ENOENT, "no transaction") // a refused commit ends it
	// Deleting makes room.
	del := a.ok(&protocol.ListRules{ServiceID: svc}).(*protocol.ListRulesReply).Rules
	a.ok(&protocol.DeleteRules{ServiceID: svc, RuleIDs: []uint32{del[0].RuleID, del[1].RuleID}})
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("g", 5, 8)})
	if got := s.usageOf(alice.UID); got != (usage{10, 160}) {
		t.Errorf("alice uses %+v, want 10 rules, 160 bytes", got)
	}
}

func TestTransactions(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	installed := a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("old", 3, 8)}).(*protocol.AddRulesReply).RuleIDs

	txn := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	if txn == 0 {
		t.Fatal("transaction id 0")
	}
	bad := testRules("bad", 2, 8)
	bad[1].ReplyLen = 0
	e := a.refused(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: bad}, syscall.EINVAL, "reply length")
	if e.Index != 1 {
		t.Errorf("a bad rule in a transaction has index %d, want 1", e.Index)
	}
	staged := a.ok(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: testRules("new", 2, 8)}).(*protocol.AddRulesReply).RuleIDs
	if len(staged) != 2 {
		t.Fatalf("ADD_RULES of 2 rules in a transaction gives ids %v", staged)
	}
	a.ok(&protocol.ReplaceRules{ServiceID: svc, Txn: txn, Updates: []protocol.RuleEntry{{RuleID: installed[0], Rule: testRule("old0000000", 20)}}})
	a.ok(&protocol.DeleteRules{ServiceID: svc, Txn: txn, RuleIDs: installed[1:2]})
	a.refused(&protocol.DeleteRules{ServiceID: svc, Txn: txn, RuleIDs: installed[1:2]}, syscall.EINVAL, "twice")
	if n := len(s.dp.rulesOf(model.ServiceID(svc))); n != 3 {
		t.Fatalf("the data plane has %d rules before COMMIT, want the 3 installed", n)
	}
	// Other connections see neither the transaction nor its changes.
	s.connect(t, alice, true).refused(&protocol.Commit{Txn: txn}, syscall.ENOENT, "no transaction")

	if added := a.ok(&protocol.Commit{Txn: txn}).(*protocol.CommitReply).Added; added != 2 {
		t.Fatalf("COMMIT says %d rules added, want 2", added)
	}
	got := s.dp.rulesOf(model.ServiceID(svc))
	if len(got) != 4 || got[model.RuleID(installed[0])].ReplyLen != 20 {
		t.Errorf("after COMMIT the data plane has %v", got)
	}
	for _, id := range staged {
		if _, ok := got[model.RuleID(id)]; !ok {
			t.Errorf("rule %d, staged by ADD_RULES, did not land under its id: %v", id, got)
		}
	}

	for range maxTxns {
		a.ok(&protocol.Begin{ServiceID: svc})
	}
	a.refused(&protocol.Begin{ServiceID: svc}, syscall.ENOSPC, "4 open transactions")
	a.ok(&protocol.Abort{Txn: txn + 1})
	a.refused(&protocol.Abort{Txn: txn + 1}, syscall.ENOENT, "no transaction")
	a.ok(&protocol.Begin{ServiceID: svc})
}

// A transaction holds its service, not its id: when the socket closes and
// the id names a new service, the transaction does not land there.
func TestTransactionOutlivesService(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	txn := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	a.ok(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: testRules("t", 1, 8)})
	sv := s.service(svc)
	s.dp.RemoveService(sv.ID)
	s.SocketClosed(sv.ID, sv.Info)
	a.refused(&protocol.Commit{Txn: txn}, syscall.ENOENT, "has ended")
}

func TestDuplicateIndex(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("r", 3, 8)})
	batch := testRules("s", 4, 8)
	batch[3] = testRules("r", 2, 8)[1]
	e := a.refused(&protocol.AddRules{ServiceID: svc, Rules: batch}, syscall.EEXIST, "rule 3 of the batch has the same condition as installed rule")
	batch[3] = batch[1]
	e2 := a.refused(&protocol.AddRules{ServiceID: svc, Rules: batch}, syscall.EEXIST, "rule 3 of the batch has the same condition as rule 1 of the batch")
	if e.Index != 3 || e2.Index != 3 {
		t.Errorf("indexes %d, %d; want 3", e.Index, e2.Index)
	}
}

// Rules of one offset and pattern with disjoint length ranges coexist; an
// overlap is refused, and the error names the item and both ranges.
func TestDuplicateLengths(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	ranged := func(min, max uint16) rule.Rule {
		r := testRule("r", 8)
		r.Condition.MinLen, r.Condition.MaxLen = min, max
		return r
	}
	ids := a.ok(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{ranged(20, 20), ranged(21, 0)}}).(*protocol.AddRulesReply).RuleIDs
	other := testRule("s", 8)
	e := a.refused(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{other, ranged(25, 30)}}, syscall.EEXIST,
		fmt.Sprintf("rule 1 of the batch has the same condition as installed rule %d of service %d (1 bytes at offset 0, request lengths 21- and 25-30)", ids[1], svc))
	e2 := a.refused(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{ranged(10, 19), other, ranged(19, 19)}}, syscall.EEXIST,
		"rule 2 of the batch has the same condition as rule 0 of the batch (1 bytes at offset 0, request lengths 10-19 and 19)")
	if e.Index != 1 || e2.Index != 2 {
		t.Errorf("indexes %d, %d; want 1, 2", e.Index, e2.Index)
	}
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{ranged(10, 19), other}})
}

// LIST_RULES pages hold as many rules as fit, in rising id order, and
// together every rule once.
func TestListRulesPages(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	want := map[uint32]rule.Rule{}
	for chunk := range 6 {
		rs := testRules(string(rune('a'+chunk)), 150, 1400) // 150 × about 1430 bytes fit one message
		ids := a.ok(&protocol.AddRules{ServiceID: svc, Rules: rs}).(*protocol.AddRulesReply).RuleIDs
		for i, id := range ids {
			want[id] = rs[i]
		}
	}
	for _, max := range []uint32{0, 7} {
		got := map[uint32]rule.Rule{}
		pages := 0
		for start := uint32(0); start != protocol.LastPage; pages++ {
			page := a.ok(&protocol.ListRules{ServiceID: svc, Start: start, Max: max}).(*protocol.ListRulesReply)
			for i, e := range page.Rules {
				if e.RuleID < start || (i > 0 && e.RuleID <= page.Rules[i-1].RuleID) {
					t.Fatalf("page from %d: rule %d out of order", start, e.RuleID)
				}
				got[e.RuleID] = e.Rule
			}
			if max > 0 && len(page.Rules) > int(max) {
				t.Fatalf("page of %d rules; max is %d", len(page.Rules), max)
			}
			start = page.Next
		}
		if !maps.EqualFunc(got, want, func(a, b rule.Rule) bool { return reflect.DeepEqual(a, b) }) {
			t.Errorf("max %d: %d pages hold %d rules, want %d", max, pages, len(got), len(want))
		}
		t.Logf("max %d: %d rules in %d pages", max, len(got), pages)
	}
	counters := a.ok(&protocol.RuleStats{ServiceID: svc, Max: 5}).(*protocol.RuleStatsReply)
	if len(counters.Counters) != 5 || counters.Next != counters.Counters[4].RuleID+1 {
		t.Errorf("RULE_STATS page: %+v", counters)
	}
}

// What the server acknowledged is what the journal replays, and a server
// restored from it serves the same rules under the same ids.
func TestJournalMatchesState(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc, gone := a.attach(), a.attach()
	ids := a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("j", 5, 8)}).(*protocol.AddRulesReply).RuleIDs
	a.ok(&protocol.ReplaceRules{ServiceID: svc, Updates: []protocol.RuleEntry{{RuleID: ids[2], Rule: testRule("jj", 30)}}})
	a.ok(&protocol.DeleteRules{ServiceID: svc, RuleIDs: ids[:1]})
	a.ok(&protocol.AddRules{ServiceID: gone, Rules: testRules("g", 2, 8)})
	a.ok(&protocol.Detach{ServiceID: gone})

	j, rep, err := journal.Open(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	want := s.service(svc).Service
	if len(rep.Services) != 1 || !reflect.DeepEqual(*rep.Services[model.ServiceID(svc)], want) {
		t.Fatalf("journal replays %+v, want service %+v", rep.Services, want)
	}

	// A restarted server restores it, if its socket is still open.
	restarted := newTestServer(t, nil)
	restarted.dp.restorable[want.Info.Cookie] = true
	if n, r := restarted.Restore(restarted.dp, rep.Services); n != 1 || r != 4 {
		t.Fatalf("restored %d services, %d rules; want 1, 4", n, r)
	}
	if got := restarted.dp.rulesOf(want.ID); !reflect.DeepEqual(got, want.Rules) {
		t.Errorf("restored data plane has %v, want %v", got, want.Rules)
	}
	if got, want := restarted.usageOf(alice.UID), s.usageOf(alice.UID); got != want {
		t.Errorf("restored usage %+v, want %+v", got, want)
	}
	closed := newTestServer(t, nil)
	if n, _ := closed.Restore(closed.dp, rep.Services); n != 0 {
		t.Errorf("restored %d services whose sockets closed", n)
	}
}

// The journal is compacted once it is past twice the size of a snapshot.
func TestCompaction(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	rs := testRules("c", 100, 1400)
	ids := a.ok(&protocol.AddRules{ServiceID: svc, Rules: rs}).(*protocol.AddRulesReply).RuleIDs
	for round := range 20 {
		updates := make([]protocol.RuleEntry, len(ids))
		for i, id := range ids {
			updates[i] = protocol.RuleEntry{RuleID: id, Rule: rs[i]}
			updates[i].Rule.ReplyLen = uint16(1300 + round)
		}
		a.ok(&protocol.ReplaceRules{ServiceID: svc, Updates: updates})
		if size, live := s.journalSizes(); size > minCompact && size > 2*live {
			t.Fatalf("journal is %d bytes, more than twice the %d of a snapshot", size, live)
		}
	}
	if size, live := s.journalSizes(); live <= 0 || size < live {
		t.Errorf("journal %d bytes, snapshot %d", size, live)
	}
}

func TestStatus(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.MaxRules = 1234 })
	s.setInterfaces([]protocol.Interface{{Ifindex: 1, Name: "lo", XDP: "generic", TC: true}})
	a := s.connect(t, alice, true)
	svc := a.attach()
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("s", 3, 8)})
	st := a.ok(&protocol.Status{}).(*protocol.StatusReply)
	if st.Rules != 3 || st.Capacity != 1234 || st.Services != 1 || len(st.Interfaces) != 1 || st.Daemon != s.version {
		t.Errorf("STATUS = %+v", st)
	}
	ss := a.ok(&protocol.ServiceStats{ServiceID: svc}).(*protocol.ServiceStatsReply)
	if *ss != (protocol.ServiceStatsReply{Matched: 3, Passed: 1, Rules: 3, RuleBytes: 3 * 16}) {
		t.Errorf("SERVICE_STATS = %+v", ss)
	}
}

// The ids a transaction was given for its added rules are given back
// however it ends without landing them: aborted, refused at COMMIT, or
// with its connection.
func TestTransactionIDsGivenBack(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	svc := a.attach()
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("old", 1, 8)})
	stage := func(c *conn, rs []rule.Rule) []model.RuleID {
		t.Helper()
		txn := c.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
		var ids []model.RuleID
		for _, id := range c.ok(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: rs}).(*protocol.AddRulesReply).RuleIDs {
			ids = append(ids, model.RuleID(id))
		}
		return ids
	}
	givenBack := func(how string, ids []model.RuleID) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.dp.mu.Lock()
			ok := len(s.dp.released) >= len(ids) && slices.Equal(s.dp.released[len(s.dp.released)-len(ids):], ids)
			s.dp.mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: ids %v were not given back", how, ids)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	ids := stage(a, testRules("a", 2, 8))
	a.ok(&protocol.Abort{Txn: 1})
	givenBack("aborted", ids)

	// The first rule's condition is installed already: COMMIT refuses.
	dup := append(testRules("b", 1, 8), testRules("old", 1, 8)...)
	ids = stage(a, dup)
	a.refused(&protocol.Commit{Txn: 2}, syscall.EEXIST, "same condition")
	givenBack("refused", ids)

	b := s.connect(t, alice, true)
	ids = stage(b, testRules("c", 3, 8))
	b.close()
	givenBack("connection closed", ids)
}

// A uid's open transactions hold rule ids, which count against the host's
// capacity: together they may hold no more than the uid's quota.
func TestTransactionsShareTheQuota(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.QuotaRules = 5 })
	a := s.connect(t, alice, true)
	svc := a.attach()
	first := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	a.ok(&protocol.AddRules{ServiceID: svc, Txn: first, Rules: testRules("a", 3, 8)})
	second := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	a.refused(&protocol.AddRules{ServiceID: svc, Txn: second, Rules: testRules("b", 3, 8)}, syscall.EDQUOT,
		"quota of 5 rules for uid 1000 exceeded: 0 installed, 3 held by open transactions, 3 more requested")
	a.ok(&protocol.Abort{Txn: first})
	a.ok(&protocol.AddRules{ServiceID: svc, Txn: second, Rules: testRules("b", 3, 8)})
	if added := a.ok(&protocol.Commit{Txn: second}).(*protocol.CommitReply).Added; added != 3 {
		t.Fatalf("COMMIT added %d rules, want 3", added)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held) != 0 {
		t.Errorf("after every transaction ended, santad still holds ids for %v", s.held)
	}
}
