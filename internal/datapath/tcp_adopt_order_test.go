package datapath

import (
	"io"
	"net"
	"testing"
	"time"
)

// adoptOne registers the rig's listener again with its rules and adopts
// its connections, as santad does at ATTACH. Whether the one connection is
// adopted or skipped as busy is the data path's choice; either way its
// requests must be answered, in order.
func (r *tcpRig) adoptOne(t *testing.T) {
	t.Helper()
	r.register(t)
	r.addRules(t)
	got, err := r.adopt()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("adopted %d, skipped %v", got.Adopted, got.Skipped)
}

// readWithin reads exactly n bytes from c, or what came within d.
func readWithin(c net.Conn, n int, d time.Duration) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(d))
	got := make([]byte, n)
	k, err := io.ReadFull(c, got)
	return got[:k], err
}

// A thread-per-connection server sleeps in read() on its idle connection
// when santad adopts it (ATTACH with connections accepted before): nothing
// unread, nothing unsent. Adopted, the read() that began in tcp_recvmsg,
// before the socket's proto became tcp_bpf, would wait on the receive
// queue, while the verdict passed the next request (a task is blocked on
// the socket) into the psock's ingress_msg, where that read() never
// looks: neither answered nor delivered. AdoptConnection refuses such a
// connection (a task blocked on it: SANTA_SO_ADOPTABLE), and the
// application answers.
func TestTCPAdoptWhileApplicationBlocksInReceive(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{blocking: true})
	defer r.back()
	if err := r.d.RemoveService(r.svc); err != nil {
		t.Fatal(err)
	}
	c := r.dial(t, "tcp4")
	exchange(t, c, []byte("miss\n"), []byte("APP:miss\n"))
	time.Sleep(50 * time.Millisecond) // the application blocks in read() again
	r.adoptOne(t)
	if _, err := c.Write([]byte(hotReq)); err != nil {
		t.Fatal(err)
	}
	// "HOT!\n" from the kernel, or "APP:GET /hot\n" from the application:
	// the first 5 bytes of either.
	got, err := readWithin(c, len(hotReply), 3*time.Second)
	if err != nil {
		ps, _ := r.d.PathStats()
		t.Fatalf("request %q after adoption: got %q, %v: neither the kernel nor the application answered (tcp_app_receiving %d)",
			hotReq, got, err, ps["tcp_app_receiving"])
	}
}

// A connection whose application has read a request and not yet written
// its reply has nothing unread and nothing unsent. Adopted, a pipelining
// client's next request, matched, would be answered by the kernel before
// the application's reply to the request before it. AdoptConnection
// refuses it: it received data and sent none, or received data after the
// last it sent (TCP_INFO's byte counts and times). Both cases: the
// connection's first request, and one after an answered request. Not
// covered (docs/tcp.md, "Attach"): a request that came in the same tick
// as the last data sent, a reply begun and not finished, requests read
// together and answered one by one.
func TestTCPAdoptDoesNotOvertakeApplicationsReply(t *testing.T) {
	for _, answeredBefore := range []bool{false, true} {
		adoptDuringReply(t, answeredBefore)
	}
}

// adoptDuringReply adopts a connection while its application thinks over
// a request, and checks that the reply to the next comes after its reply.
func adoptDuringReply(t *testing.T, answeredBefore bool) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{think: 500 * time.Millisecond})
	defer r.back()
	if err := r.d.RemoveService(r.svc); err != nil {
		t.Fatal(err)
	}
	c := r.dial(t, "tcp4")
	if answeredBefore {
		if _, err := c.Write([]byte("miss\n")); err != nil {
			t.Fatal(err)
		}
		if got, err := readWithin(c, len("APP:miss\n"), 3*time.Second); err != nil {
			t.Fatalf("first reply %q, %v", got, err)
		}
		time.Sleep(50 * time.Millisecond) // ticks after the reply left
	}
	if _, err := c.Write([]byte("slow\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // read by the application, which thinks
	r.adoptOne(t)
	if _, err := c.Write([]byte(hotReq)); err != nil { // pipelined
		t.Fatal(err)
	}
	want := "APP:slow\n"
	got, err := readWithin(c, len(want), 3*time.Second)
	if err != nil || string(got) != want {
		t.Fatalf("answered before: %v: reply %q, %v; want %q (the reply to the request before)", answeredBefore, got, err, want)
	}
}

// A request the reply program gives back to the application (its rule
// was deleted after the verdict bounced it: tcp_reply_fallback) makes the
// connection the application's. But a matched request behind it, bounced
// already, still counts as pending, and the reply program answers it at
// once: the kernel's reply to the later request leaves before the
// application's reply to the earlier one. Pipelined requests under rule
// churn (bounded: 400 connections, 60 s).
func TestTCPReplyFallbackKeepsOrder(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	if _, err := r.d.AddRule(r.svc, tcpRule(midReq, midReply)); err != nil {
		t.Fatal(err)
	}
	stopChurn := churnHotRule(t, r)
	defer stopChurn()
	sent := []string{hotReq, midReq, midReq, midReq}
	deadline := time.Now().Add(60 * time.Second)
	for round := 0; round < 400 && time.Now().Before(deadline); round++ {
		c := r.dial(t, "tcp4")
		for _, req := range sent {
			if _, err := c.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
		}
		readInOrder(t, c, sent)
		c.Close()
	}
	stopChurn()
	ps, _ := r.d.PathStats()
	t.Logf("no reply out of order; %d requests fell back in the reply program", ps["tcp_reply_fallback"])
}
