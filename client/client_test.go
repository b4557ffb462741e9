package client

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// dial connects a client to a fresh fake santad.
func dial(t *testing.T) (*Client, *fake) {
	f := &fake{}
	return dialTo(t, serve(t, f.handle)), f
}

func dialTo(t *testing.T, path string) *Client {
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newRule(pattern, reply string) rule.Rule {
	return rule.Rule{
		Condition:  rule.Condition{Pattern: []byte(pattern)},
		Processors: []rule.Processor{rule.Put(0, []byte(reply)), rule.Copy(0, 1, 0)},
		ReplyLen:   uint16(len(reply)),
	}
}

func TestDial(t *testing.T) {
	c, f := dial(t)
	if s := c.Session(); s.Version != protocol.MaxVersion || s.UID != 1000 || s.PID != 42 || s.Daemon != "fake" {
		t.Errorf("session %+v is not the fake's HELLO reply", s)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := filepath.Base(os.Args[0]); f.client != want {
		t.Errorf("HELLO named the client %q, want %q", f.client, want)
	}
	if f.hello.MinVersion != protocol.MinVersion || f.hello.MaxVersion != protocol.MaxVersion {
		t.Errorf("HELLO offers versions %d to %d; want %d to %d", f.hello.MinVersion, f.hello.MaxVersion, protocol.MinVersion, protocol.MaxVersion)
	}
}

// At version 2 a rule's length condition goes to the daemon and comes back
// listed; a daemon of version 1 is still served, but a length condition,
// which version 1 cannot carry, is refused before it is sent, never
// dropped.
func TestLengthConditionByVersion(t *testing.T) {
	exact := newRule("a", "A")
	exact.Condition = rule.ExactLength(exact.Condition, 7)
	c, _ := dial(t)
	if _, err := c.AddRules(fakeService, []rule.Rule{exact}); err != nil {
		t.Fatal(err)
	}
	for e, err := range c.Rules(fakeService) {
		if err != nil || e.Rule.Condition.MinLen != 7 || e.Rule.Condition.MaxLen != 7 {
			t.Fatalf("listed %+v, %v; want the length 7 back", e.Rule.Condition, err)
		}
	}

	old := &fake{newest: protocol.Version1}
	c = dialTo(t, serve(t, old.handle))
	if v := c.Session().Version; v != protocol.Version1 {
		t.Fatalf("a daemon of version 1 agrees on version %d", v)
	}
	_, err := c.AddRules(fakeService, []rule.Rule{newRule("b", "B"), exact})
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != syscall.EINVAL || pe.Index != 1 ||
		pe.Message != "rules[1].flags: a length condition needs protocol version 2; this connection speaks version 1" {
		t.Fatalf("AddRules of a length condition at version 1 gives %v", err)
	}
	if ids, err := c.AddRules(fakeService, []rule.Rule{newRule("b", "B")}); err != nil || len(ids) != 1 {
		t.Fatalf("AddRules without a length condition at version 1 gives %v, %v", ids, err)
	}
}

func TestDialRefused(t *testing.T) {
	path := serve(t, func(protocol.Body, []int) protocol.Body {
		return protocol.Errorf(syscall.EPROTONOSUPPORT, "no common version")
	})
	_, err := Dial(path)
	if !errors.Is(err, syscall.EPROTONOSUPPORT) {
		t.Errorf("Dial gives %v, want EPROTONOSUPPORT", err)
	}
	if _, err := Dial(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("Dial of a missing socket succeeds")
	}
}

// TestAttach checks that the daemon receives the application's very socket.
func TestAttach(t *testing.T) {
	c, f := dial(t)
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	var cookie uint64
	raw, _ := udp.SyscallConn()
	raw.Control(func(fd uintptr) { cookie, err = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE) })
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Attach(udp)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got := f.cookies
	f.mu.Unlock()
	if s.ServiceID != fakeService || s.Cookie != cookie || !slices.Equal(got, []uint64{cookie}) {
		t.Errorf("attach gives %+v and the daemon saw cookies %v; want service %d, cookie %d", s, got, fakeService, cookie)
	}
	if _, err := c.AttachFD(-1); err == nil {
		t.Error("AttachFD(-1) succeeds")
	}
}

func TestRules(t *testing.T) {
	c, _ := dial(t)
	rs := []rule.Rule{newRule("a", "A"), newRule("b", "B"), newRule("c", "C")}
	ids, err := c.AddRules(fakeService, rs)
	if err != nil || !slices.Equal(ids, []uint32{1, 2, 3}) {
		t.Fatalf("AddRules gives %v, %v; want ids 1, 2, 3", ids, err)
	}
	if err := c.ReplaceRules(fakeService, []RuleEntry{{RuleID: 2, Rule: newRule("B", "b")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRules(fakeService, []uint32{1}); err != nil {
		t.Fatal(err)
	}
	more, err := c.AddRules(fakeService, rs[:2])
	if err != nil {
		t.Fatal(err)
	}
	want := []RuleEntry{{RuleID: 2, Rule: newRule("B", "b")}, {RuleID: 3, Rule: rs[2]}, {RuleID: more[0], Rule: rs[0]}, {RuleID: more[1], Rule: rs[1]}}
	var got []RuleEntry
	for e, err := range c.Rules(fakeService) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if !slices.EqualFunc(got, want, sameEntry) {
		t.Errorf("Rules gives %v, want %v", got, want)
	}
	var counters []RuleCounters
	for rc, err := range c.RuleStats(fakeService) {
		if err != nil {
			t.Fatal(err)
		}
		counters = append(counters, rc)
	}
	if len(counters) != len(want) || counters[3].RuleID != want[3].RuleID || counters[3].Hits != uint64(want[3].RuleID)*10 {
		t.Errorf("RuleStats gives %v", counters)
	}
}

func sameEntry(a, b RuleEntry) bool {
	return a.RuleID == b.RuleID && a.Rule.ReplyLen == b.Rule.ReplyLen &&
		string(a.Rule.Condition.Pattern) == string(b.Rule.Condition.Pattern) &&
		string(a.Rule.Processors[0].Bytes) == string(b.Rule.Processors[0].Bytes)
}

// TestRulesStopEarly checks that leaving the loop leaves no reply unread.
func TestRulesStopEarly(t *testing.T) {
	c, _ := dial(t)
	if _, err := c.AddRules(fakeService, []rule.Rule{newRule("a", "A"), newRule("b", "B"), newRule("c", "C")}); err != nil {
		t.Fatal(err)
	}
	for range c.Rules(fakeService) {
		break
	}
	if s, err := c.ServiceStats(fakeService); err != nil || s.Rules != 3 || s.Matched != 5 {
		t.Errorf("ServiceStats after a loop left early gives %+v, %v", s, err)
	}
}

func TestPagesThatDoNotMoveOn(t *testing.T) {
	path := serve(t, func(req protocol.Body, _ []int) protocol.Body {
		switch req.(type) {
		case *protocol.Hello:
			return &protocol.HelloReply{Version: 1}
		case *protocol.ListRules:
			return &protocol.ListRulesReply{Next: 0}
		}
		return &protocol.Error{}
	})
	c := dialTo(t, path)
	n := 0
	for _, err := range c.Rules(1) {
		if n++; n > 1 || err == nil {
			t.Fatalf("Rules yields item %d, error %v; want one error", n, err)
		}
	}
}

func TestTxn(t *testing.T) {
	c, _ := dial(t)
	txn, err := c.Begin(fakeService)
	if err != nil || txn.ID() != fakeTxn {
		t.Fatalf("Begin gives %v, %v", txn, err)
	}
	var ids []uint32
	for _, r := range []rule.Rule{newRule("a", "A"), newRule("b", "B")} {
		got, err := txn.AddRules([]rule.Rule{r})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	if !slices.Equal(ids, []uint32{1, 2}) {
		t.Fatalf("AddRules in a transaction gives ids %v; want 1, 2", ids)
	}
	if added, err := txn.Commit(); err != nil || added != 2 {
		t.Fatalf("Commit gives %d, %v; want 2 added", added, err)
	}
	txn, err = c.Begin(fakeService)
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.DeleteRules([]uint32{1}); err != nil {
		t.Fatal(err)
	}
	if err := txn.ReplaceRules([]RuleEntry{{RuleID: 1, Rule: newRule("x", "X")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.AddRules([]rule.Rule{newRule("c", "C")}); err != nil {
		t.Fatal(err)
	}
	if err := txn.Abort(); err != nil {
		t.Fatal(err)
	}
	if ids, err := c.AddRules(fakeService, []rule.Rule{newRule("d", "D")}); err != nil || !slices.Equal(ids, []uint32{3}) {
		t.Errorf("after Abort, AddRules gives %v, %v; want id 3 (nothing of the aborted transaction applied)", ids, err)
	}
}

func TestErrors(t *testing.T) {
	c, _ := dial(t)
	bad := newRule("b", "B")
	bad.ReplyLen = 0
	tests := []struct {
		name  string
		err   error
		code  syscall.Errno
		index uint32
	}{
		{"daemon refuses a rule", second(c.AddRules(fakeService, []rule.Rule{newRule("a", "A"), bad})), syscall.EINVAL, 1},
		{"daemon knows no such service", c.Detach(99), syscall.ENOENT, NoIndex},
		{"daemon knows no such rule", c.DeleteRules(fakeService, []uint32{5}), syscall.ENOENT, 0},
		{"refused before sending", second(c.AddRules(fakeService, nil)), syscall.EINVAL, NoIndex},
	}
	for _, tt := range tests {
		var e *Error
		if !errors.As(tt.err, &e) || e.Code != tt.code || e.Index != tt.index || !errors.Is(tt.err, tt.code) {
			t.Errorf("%s: error %v; want a *Error %v at index %d", tt.name, tt.err, tt.code, tt.index)
		}
	}
	if err := c.Detach(fakeService); err != nil {
		t.Errorf("the connection does not survive refusals: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestServicesAndStatus(t *testing.T) {
	c, _ := dial(t)
	services, err := c.Services()
	if err != nil || len(services) != 1 || services[0].ServiceID != fakeService {
		t.Errorf("Services gives %+v, %v", services, err)
	}
	st, err := c.Status()
	if err != nil || st.Daemon != "fake" || len(st.Interfaces) != 1 || st.Interfaces[0].XDP != "generic" {
		t.Errorf("Status gives %+v, %v", st, err)
	}
}

func TestClosed(t *testing.T) {
	c, _ := dial(t)
	c.Close()
	if _, err := c.Status(); err == nil {
		t.Error("Status on a closed client succeeds")
	}
}
