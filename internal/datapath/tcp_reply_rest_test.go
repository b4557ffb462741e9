package datapath

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/rule"
)

// Replies that meet a full send buffer (santa_open_reply). The sockmap
// worker sends without waiting: TCP takes what the send buffer has room
// for, the rest of the reply is freed, and the worker sends the request
// again later. Before the reply program built the rest of the reply, the
// client got a cut reply and then its own request.

// A server that caps its send buffer (nginx's listen ... sndbuf=,
// HAProxy's tune.sndbuf) and a client that asks for several large replies
// at once: every reply arrives whole, in order.
func TestTCPLargeRepliesUnderBackpressure(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	// Inherited by the connections the listener accepts.
	control(t, r.ln)(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 65536) })
	c := r.dial(t, "tcp4")
	const requests = 6
	for range requests {
		if _, err := c.Write([]byte(bigReq)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // one segment each
	}
	time.Sleep(100 * time.Millisecond)
	expectStream(t, c, bytes.Repeat(bigReply, requests))
	ps, _ := r.d.PathStats()
	if ps["tcp_answered"] != requests || ps["tcp_reply_rest"] == 0 || ps["tcp_reply_broken"] != 0 {
		t.Errorf("paths: answered %d (want %d), reply_rest %d (want some: the send buffer was full), reply_broken %d",
			ps["tcp_answered"], requests, ps["tcp_reply_rest"], ps["tcp_reply_broken"])
	}
}

// A client that stops reading, with a small receive buffer of its own,
// against the kernel's default send buffer (autotuned) and a capped one:
// the replies wait, then arrive whole once it reads. The rule's copy
// processor puts request bytes at the reply's end, which the rest is built
// with again.
func TestTCPRepliesToAClientThatStopsReading(t *testing.T) {
	for _, sndbuf := range []int{0, 32768} {
		name := map[bool]string{true: "autotuned", false: "capped"}[sndbuf == 0]
		t.Run(name, func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
			defer r.back()
			copyReq, copyReply := addCopyRule(t, r)
			r.addRules(t)
			if sndbuf > 0 {
				control(t, r.ln)(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, sndbuf) })
			}
			c := dialSmallReceiveBuffer(t, r)
			var want []byte
			for i := range 8 {
				req, reply := copyReq, copyReply
				if i%2 == 1 {
					req, reply = hotReq, hotReply
				}
				if _, err := c.Write([]byte(req)); err != nil {
					t.Fatal(err)
				}
				want = append(want, reply...)
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // the worker tries again and again meanwhile
			expectStream(t, c, want)
			ps, _ := r.d.PathStats()
			if ps["tcp_answered"] != 8 || ps["tcp_reply_broken"] != 0 || sndbuf > 0 && ps["tcp_reply_rest"] == 0 {
				t.Errorf("paths: answered %d (want 8), reply_rest %d (want some with a capped buffer), reply_broken %d",
					ps["tcp_answered"], ps["tcp_reply_rest"], ps["tcp_reply_broken"])
			}
		})
	}
}

// The rule of a reply TCP took part of is replaced while the client does
// not read. While its old slot waits for its grace period, the rest comes
// from it: the old reply, whole. Once the slot is freed and holds another
// rule's body, the rest cannot be known: the connection ends after the
// part sent, and no byte of that body follows it.
func TestTCPReplyRestAfterItsRuleChanged(t *testing.T) {
	newReply := bytes.Repeat([]byte("NEW!"), len(bigReply)/4+1)[:len(bigReply)]
	for _, freed := range []bool{false, true} {
		name := map[bool]string{false: "slot kept", true: "slot freed"}[freed]
		t.Run(name, func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
			defer r.back()
			id, err := r.d.AddRule(r.svc, tcpRule(bigReq, bigReply))
			if err != nil {
				t.Fatal(err)
			}
			// Buffers of a few KiB at both ends: the reply cannot be
			// sent whole before the client reads.
			control(t, r.ln)(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 4096) })
			c := dialSmallReceiveBuffer(t, r)
			if !freed {
				holdReclaimer(t, r.d)
			}
			if _, err := c.Write([]byte(bigReq)); err != nil {
				t.Fatal(err)
			}
			if !eventually(5*time.Second, 10*time.Millisecond, func() bool {
				ps, _ := r.d.PathStats()
				return ps["tcp_answered"] == 1
			}) {
				t.Fatal("the request was not answered")
			}
			old := r.d.slotOf(id)
			oldGen := atomic.LoadUint32(r.d.store.gens.of(old))
			if err := r.d.ReplaceRule(id, tcpRule(bigReq, newReply)); err != nil {
				t.Fatal(err)
			}
			if freed {
				if !eventually(5*time.Second, 10*time.Millisecond, func() bool { return atomic.LoadUint32(r.d.store.gens.of(old)) != oldGen }) {
					t.Fatal("the replaced rule's slot was not freed")
				}
				// Another rule takes the slot, with a reply as long.
				other, err := r.d.AddRule(r.svc, tcpRule("GET /other\n", newReply))
				if err != nil {
					t.Fatal(err)
				}
				if r.d.slotOf(other) != old {
					t.Fatalf("the new rule has slot %#x, not the freed %#x", r.d.slotOf(other), old)
				}
			}
			if !freed {
				expectStream(t, c, bigReply)
				exchange(t, c, []byte(bigReq), newReply)
				if ps, _ := r.d.PathStats(); ps["tcp_reply_rest"] == 0 || ps["tcp_reply_broken"] != 0 {
					t.Errorf("paths: reply_rest %d (want some), reply_broken %d", ps["tcp_reply_rest"], ps["tcp_reply_broken"])
				}
				return
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, err := io.ReadAll(c)
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				ps, _ := r.d.PathStats()
				t.Fatalf("reading to the end: %v, after %d bytes; paths: reply_rest %d, reply_broken %d",
					err, len(got), ps["tcp_reply_rest"], ps["tcp_reply_broken"])
			}
			if len(got) == 0 || len(got) >= len(bigReply) || !bytes.Equal(got, bigReply[:len(got)]) {
				t.Fatalf("got %d bytes (%q), want a part of the old reply (of %d bytes) and the end", len(got), trim(got), len(bigReply))
			}
			if ps, _ := r.d.PathStats(); ps["tcp_reply_broken"] != 1 {
				t.Errorf("tcp_reply_broken %d, want 1", ps["tcp_reply_broken"])
			}
		})
	}
}

// dialSmallReceiveBuffer connects to the rig with a receive buffer of a
// few KiB, set before the handshake: the window it offers stays small, and
// a large reply fills the server's send buffer.
func dialSmallReceiveBuffer(t *testing.T, r *tcpRig) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, raw syscall.RawConn) error {
		var err error
		raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		return err
	}}
	c, err := d.Dial("tcp4", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r.waitAccepted(t)
	return c
}

// expectStream reads exactly want from c, and tells where it differs.
func expectStream(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	got, err := readWithin(c, len(want), 5*time.Second)
	if err == nil && bytes.Equal(got, want) {
		return
	}
	at := 0
	for at < len(got) && at < len(want) && got[at] == want[at] {
		at++
	}
	t.Fatalf("read %d of %d bytes (%v); first difference at byte %d: %q", len(got), len(want), err, at, trim(got[at:]))
}

// addCopyRule adds a rule for "GET /copy\n" whose 64-KiB reply ends with
// bytes its copy processor takes from the request, and returns the request
// and the reply it makes.
func addCopyRule(t *testing.T, r *tcpRig) (req string, reply []byte) {
	t.Helper()
	req, reply = "GET /copy\n", bytes.Clone(bigReply)
	copy(reply[len(reply)-5:], req[4:9])
	rl := tcpRule(req, bigReply)
	rl.Processors = append(rl.Processors, rule.Copy(4, 5, uint16(len(bigReply)-5)))
	if _, err := r.d.AddRule(r.svc, rl); err != nil {
		t.Fatal(err)
	}
	return req, reply
}
