package daemon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// Rules die with their socket: an application killed with SIGKILL loses
// its service within a second, in santad's list and in the kernel.
func TestApplicationKilled(t *testing.T) {
	e := newEnv(t, "k", "", "-socket-mode", "0666")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app := e.helper(ctx, nil, "app")
	stdout, err := app.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	defer app.Wait()
	defer app.Process.Kill()
	var svc uint32
	var port uint16
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatal("the application exited before it was ready")
	}
	if _, err := fmt.Sscanf(sc.Text(), "ready service=%d port=%d", &svc, &port); err != nil {
		t.Fatalf("application says %q: %v", sc.Text(), err)
	}
	q := e.dialUDP(t, port)
	if got, err := santadtest.Ask(q, []byte("ping"), time.Second); err != nil || string(got) != "pong" {
		t.Fatalf("before the kill: %q, %v; want the kernel's pong", got, err)
	}
	root := e.client(t)

	if err := app.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var listed, answered time.Duration // when each stopped
	for (listed == 0 || answered == 0) && time.Since(killed) < 3*time.Second {
		if listed == 0 {
			svcs, err := root.Services()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(svcs, func(s client.ServiceInfo) bool { return s.ServiceID == svc }) {
				listed = time.Since(killed)
			}
		}
		if answered == 0 {
			if got, _ := santadtest.Ask(q, []byte("ping"), 20*time.Millisecond); string(got) != "pong" {
				answered = time.Since(killed)
			}
		}
	}
	t.Logf("after SIGKILL of the application: the kernel stopped answering within %v, LIST_SERVICES dropped service %d within %v",
		answered, svc, listed)
	if listed == 0 || listed > time.Second {
		t.Errorf("service %d still listed %v after its application was killed", svc, time.Since(killed))
	}
	if answered == 0 || answered > time.Second {
		t.Errorf("the kernel still answered for service %d %v after its application was killed", svc, time.Since(killed))
	}
}

// A santad killed in the middle of a large transaction loses no committed
// rule, leaves nothing of the transaction, and the kernel answers the
// committed rules all the while it is down.
func TestDaemonKilled(t *testing.T) {
	e := newEnv(t, "d", "")
	c, appSock, svc := e.attachedUDP(t)
	s := svc.ServiceID
	want := map[uint32]rule.Rule{}

	// Committed: a transaction of 20,000 DNS rules, a batch, a
	// replacement and a deletion.
	committed := dnsRules(t, 0, 20000, 64)
	txn, err := c.Begin(s)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for chunk := range slices.Chunk(committed, 500) {
		got, err := txn.AddRules(chunk)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	if _, err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		want[id] = committed[i]
	}
	pingID, err := c.AddRules(s, []rule.Rule{pingRule})
	if err != nil {
		t.Fatal(err)
	}
	want[pingID[0]] = pingRule
	bigger := dnsRules(t, 0, 1, 100)[0]
	if err := c.ReplaceRules(s, []client.RuleEntry{{RuleID: ids[0], Rule: bigger}}); err != nil {
		t.Fatal(err)
	}
	want[ids[0]] = bigger
	if err := c.DeleteRules(s, ids[1:3]); err != nil {
		t.Fatal(err)
	}
	delete(want, ids[1])
	delete(want, ids[2])

	// Not committed: santad is killed while a 200,000-rule transaction
	// streams in.
	pending := dnsRules(t, 100000, 300000, 64)
	txn2, err := c.Begin(s)
	if err != nil {
		t.Fatal(err)
	}
	halfway, streamed := make(chan struct{}), make(chan error, 1)
	go func() {
		i := 0
		for chunk := range slices.Chunk(pending, 500) {
			if _, err := txn2.AddRules(chunk); err != nil {
				streamed <- err
				return
			}
			if i++; i == 100 {
				close(halfway)
			}
		}
		streamed <- nil
	}()
	select {
	case <-halfway:
	case err := <-streamed:
		t.Fatalf("the transaction ended before santad was killed: %v", err)
	}
	e.d.Kill()
	down := time.Now()
	if err := <-streamed; err == nil {
		t.Fatal("the transaction streamed to its end through a killed santad")
	}

	// While santad is down, the kernel answers with the committed rules.
	q := e.dialUDP(t, portOf(appSock))
	asked, answered := 0, 0
	check := func(req, reply []byte) {
		asked++
		if got, err := santadtest.Ask(q, req, time.Second); err == nil && bytes.Equal(got, reply) {
			answered++
		}
	}
	for range 5 {
		check([]byte("ping"), []byte("pong"))
		check(pkttest.DNSQuery(0, pkttest.Name(0)), dnsReply(t, 0, 100))
		check(pkttest.DNSQuery(0, pkttest.Name(19999)), dnsReply(t, 19999, 64))
	}
	if err := e.d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("santad was down %v; the kernel answered %d of %d requests meanwhile", time.Since(down), answered, asked)
	if answered != asked {
		t.Errorf("the kernel answered %d of %d requests while santad was down", answered, asked)
	}

	c = e.client(t)
	checkState(t, c, s, want)
	// Nothing of the transaction: its rules are not listed, and the kernel
	// does not answer them.
	if got, err := santadtest.Ask(q, pkttest.DNSQuery(0, pkttest.Name(100000)), 200*time.Millisecond); err == nil {
		t.Errorf("the kernel answers a rule of the killed transaction: %x", got)
	}
	// The restarted santad runs the data plane and changes it. The rule has
	// a length condition, which the restarts below must keep.
	late := rule.Rule{Condition: rule.ExactLength(rule.Condition{Pattern: []byte("late")}, 4),
		Processors: []rule.Processor{rule.Put(0, []byte("LATE"))}, ReplyLen: 4}
	lateID, err := c.AddRules(s, []rule.Rule{late})
	if err != nil {
		t.Fatal(err)
	}
	want[lateID[0]] = late
	for _, rr := range [][2]string{{"ping", "pong"}, {"late", "LATE"}} {
		if got, err := santadtest.Ask(q, []byte(rr[0]), time.Second); err != nil || string(got) != rr[1] {
			t.Errorf("after the restart %q gets %q, %v; want %q", rr[0], got, err, rr[1])
		}
	}

	// Once more: now the journal is a snapshot and one record after it.
	e.d.Kill()
	if err := e.d.Start(); err != nil {
		t.Fatal(err)
	}
	checkState(t, e.client(t), s, want)

	// A clean stop leaves the data plane answering too.
	if err := e.d.Stop(); err != nil {
		t.Fatal(err)
	}
	if got, err := santadtest.Ask(q, []byte("late"), time.Second); err != nil || string(got) != "LATE" {
		t.Errorf("after SIGTERM %q gets %q, %v; want %q", "late", got, err, "LATE")
	}
	if err := e.d.Start(); err != nil {
		t.Fatal(err)
	}
	checkState(t, e.client(t), s, want)
	if got, err := santadtest.Ask(q, []byte("late!"), 200*time.Millisecond); err == nil {
		t.Errorf("after the restarts the kernel answers a request longer than the rule's length: %q", got)
	}
}

// checkState checks that service s is the only one and holds exactly want:
// the same ids, the same rules.
func checkState(t *testing.T, c *client.Client, s uint32, want map[uint32]rule.Rule) {
	t.Helper()
	svcs, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs) != 1 || svcs[0].ServiceID != s || svcs[0].Rules != uint32(len(want)) {
		t.Fatalf("services after the restart: %+v; want service %d with %d rules", svcs, s, len(want))
	}
	got := map[uint32]rule.Rule{}
	for e, err := range c.Rules(s) {
		if err != nil {
			t.Fatal(err)
		}
		got[e.RuleID] = e.Rule
	}
	if len(got) != len(want) {
		t.Fatalf("%d rules listed after the restart, want %d", len(got), len(want))
	}
	for id, r := range want {
		if !reflect.DeepEqual(got[id], r) {
			t.Fatalf("rule %d after the restart is %+v, want %+v", id, got[id], r)
		}
	}
}

// dnsRules are the DNS rules for names from to to, answered with size-byte
// replies.
func dnsRules(t *testing.T, from, to, size int) []rule.Rule {
	t.Helper()
	out := make([]rule.Rule, 0, to-from)
	for i := from; i < to; i++ {
		r, err := pkttest.SizedDNSRule(pkttest.Name(i), size)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// dnsReply is the answer to a query with transaction id 0 for name i.
func dnsReply(t *testing.T, i, size int) []byte {
	t.Helper()
	r, err := pkttest.SizedDNSReply(pkttest.Name(i), size)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
