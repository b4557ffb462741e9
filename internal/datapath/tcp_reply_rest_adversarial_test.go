package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// Adversarial tests of the rest of a reply TCP took only part of
// (santa_open_reply, docs/tcp.md "A reply larger than the send buffer's
// room"): pipelines that mix kernel and application answers behind a cut
// reply, clients that go away or half-close meanwhile, rules and services
// that go meanwhile, many connections whose rests interleave, and an
// application that writes while a reply is cut.

// capSendBuffer caps the send buffer of the connections the rig's
// listener accepts from now on (inherited from the listener).
func capSendBuffer(t *testing.T, r *tcpRig, n int) {
	t.Helper()
	control(t, r.ln)(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, n) })
}

// connEntries is how many connections the datapath holds state for.
func connEntries(r *tcpRig) int {
	var cookie uint64
	n := 0
	it := r.d.tcp.objs.Connections.Iterate()
	for it.Next(&cookie, new(santaTcpSantaConn)) {
		n++
	}
	return n
}

// expectConnEntries waits until the datapath holds state for n connections.
func expectConnEntries(t *testing.T, r *tcpRig, n int) {
	t.Helper()
	if !eventually(5*time.Second, 10*time.Millisecond, func() bool { return connEntries(r) == n }) {
		ps, _ := r.d.PathStats()
		t.Fatalf("the datapath holds %d connections, want %d; paths %v", connEntries(r), n, ps)
	}
}

// waitAnswered waits until the kernel answered n requests in all.
func waitAnswered(t *testing.T, r *tcpRig, n uint64) {
	t.Helper()
	if !eventually(5*time.Second, 5*time.Millisecond, func() bool {
		ps, _ := r.d.PathStats()
		return ps["tcp_answered"] >= n
	}) {
		ps, _ := r.d.PathStats()
		t.Fatalf("answered %d, want %d; paths %v", ps["tcp_answered"], n, ps)
	}
}

// writeEach sends each request in a segment of its own.
func writeEach(t *testing.T, c net.Conn, reqs ...string) {
	t.Helper()
	for _, req := range reqs {
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expectPrefixThenEnd reads c to its end: a part (maybe empty or whole)
// of want, then the end (or a reset). No byte that is not want's.
func expectPrefixThenEnd(t *testing.T, c net.Conn, want []byte) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(8 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading to the end: %v after %d bytes", err, len(got))
	}
	if len(got) > len(want) || !bytes.Equal(got, want[:len(got)]) {
		at := 0
		for at < len(got) && at < len(want) && got[at] == want[at] {
			at++
		}
		t.Fatalf("got %d bytes, want a prefix of %d; first difference at %d: %q", len(got), len(want), at, trim(got[at:]))
	}
	return got
}

// 1. A pipeline behind a cut reply: large and small matched requests, an
// unmatched one (the application's: the connection is the application's
// from then on, and answers every later request), more requests after it.
// The client reads late, through a small window. Every reply whole, in
// request order.
func TestAdvTCPRestPipelinedMix(t *testing.T) {
	for name, reqs := range map[string][]string{
		"miss after several": {bigReq, hotReq, midReq, bigReq, "miss\n", hotReq, bigReq, midReq},
		"miss right behind":  {bigReq, "miss\n", bigReq, hotReq},
		"only matched":       {bigReq, hotReq, bigReq, midReq, hotReq, bigReq, hotReq, hotReq},
	} {
		t.Run(name, func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
			defer r.back()
			r.addRules(t)
			capSendBuffer(t, r, 4096)
			c := dialSmallReceiveBuffer(t, r)
			var want []byte
			app := false
			kernel := uint64(0)
			for _, req := range reqs {
				if reply, ok := kernelReplies[req]; ok && !app {
					want = append(want, reply...)
					kernel++
					continue
				}
				app = true
				want = append(want, "APP:"+req...)
			}
			writeEach(t, c, reqs...)
			time.Sleep(300 * time.Millisecond)
			expectStream(t, c, want)
			exchange(t, c, []byte(hotReq), map[bool][]byte{true: []byte("APP:" + hotReq), false: hotReply}[app])
			ps, _ := r.d.PathStats()
			if !app {
				kernel++ // the last exchange too
			}
			if ps["tcp_answered"] != kernel || ps["tcp_reply_rest"] == 0 || ps["tcp_reply_broken"] != 0 {
				t.Errorf("paths: answered %d (want %d), reply_rest %d (want some), reply_broken %d",
					ps["tcp_answered"], kernel, ps["tcp_reply_rest"], ps["tcp_reply_broken"])
			}
			r.expectNothingUnread(t)
		})
	}
}

// 2a. The client resets the connection (SO_LINGER 0) while a reply is cut
// and more wait behind it: the datapath forgets the connection, and a new
// connection is answered whole.
func TestAdvTCPRestClientResets(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	capSendBuffer(t, r, 4096)
	for i := range 3 {
		before, _ := r.d.PathStats()
		c := dialSmallReceiveBuffer(t, r)
		writeEach(t, c, bigReq, bigReq, hotReq)
		waitAnswered(t, r, before["tcp_answered"]+1)
		time.Sleep(time.Duration(50*i) * time.Millisecond) // retries of the rest meanwhile
		// A few bytes read: the window opens a little, the rest is built.
		readWithin(c, 1000, time.Second)
		time.Sleep(30 * time.Millisecond)
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
		expectConnEntries(t, r, 0)
	}
	c := dialSmallReceiveBuffer(t, r)
	writeEach(t, c, bigReq, hotReq, bigReq)
	time.Sleep(200 * time.Millisecond)
	expectStream(t, c, append(append(bytes.Clone(bigReply), hotReply...), bigReply...))
	ps, _ := r.d.PathStats()
	if ps["tcp_reply_rest"] == 0 {
		t.Errorf("tcp_reply_rest 0, want some; paths %v", ps)
	}
	t.Logf("paths: %v", ps)
	c.Close()
	expectConnEntries(t, r, 0)
}

// 2b. The client half-closes while a reply is cut and more are bounced
// behind it, and reads only later: its FIN waits until the kernel sent
// its replies; it gets every reply whole, then the end.
func TestAdvTCPRestClientHalfCloses(t *testing.T) {
	for _, copyRule := range []bool{false, true} {
		t.Run(fmt.Sprintf("copy=%v", copyRule), func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
			defer r.back()
			copyReq, copyReply := addCopyRule(t, r)
			r.addRules(t)
			capSendBuffer(t, r, 4096)
			c := dialSmallReceiveBuffer(t, r).(*net.TCPConn)
			req, reply := bigReq, bigReply
			if copyRule {
				req, reply = copyReq, copyReply
			}
			writeEach(t, c, req, hotReq, req)
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			want := append(append(bytes.Clone(reply), hotReply...), reply...)
			start := time.Now()
			got := expectPrefixThenEnd(t, c, want)
			ps, _ := r.d.PathStats()
			if len(got) != len(want) {
				t.Fatalf("got %d bytes then the end, want %d; paths %v", len(got), len(want), ps)
			}
			t.Logf("read all in %v; fin_held %d, reply_rest %d", time.Since(start), ps["tcp_fin_held"], ps["tcp_reply_rest"])
			if ps["tcp_reply_rest"] == 0 || ps["tcp_reply_broken"] != 0 || ps["tcp_answered"] != 3 {
				t.Errorf("paths %v: want answered 3, reply_rest some, reply_broken 0", ps)
			}
			c.Close()
			expectConnEntries(t, r, 0)
		})
	}
}

// 2c. The application closes the connection (an idle timeout) while a
// kernel reply is cut and more wait behind it, the client not reading:
// the datapath forgets the connection, and the client reads a part of
// the replies, then the end, never another byte.
func TestAdvTCPRestApplicationCloses(t *testing.T) {
	ln, back := listenInNewNetns(t, "tcp4", "127.0.0.1:0")
	defer back()
	app := &appServer{ln: ln, accepted: make(chan struct{}, 4)}
	r := &tcpRig{d: openTest(t), ln: ln.(*net.TCPListener), app: app, addr: ln.Addr().String(), back: back}
	r.register(t)
	r.addRules(t)
	capSendBuffer(t, r, 4096)
	closeNow := make(chan struct{})
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		app.accepted <- struct{}{}
		<-closeNow
		c.Close()
	}()
	c := dialSmallReceiveBuffer(t, r)
	writeEach(t, c, bigReq, midReq, bigReq)
	waitAnswered(t, r, 1)
	time.Sleep(50 * time.Millisecond)
	close(closeNow)
	<-closed
	expectConnEntries(t, r, 0)
	want := append(append(bytes.Clone(bigReply), midReply...), bigReply...)
	got := expectPrefixThenEnd(t, c, want)
	ps, _ := r.d.PathStats()
	t.Logf("read %d of %d bytes, then the end; answered %d, reply_rest %d, reply_broken %d",
		len(got), len(want), ps["tcp_answered"], ps["tcp_reply_rest"], ps["tcp_reply_broken"])
}

// 3a. The rule of a cut reply is deleted (not replaced) while the client
// does not read. Its slot kept (reclaimer held): the old reply, whole, and
// the next request goes to the application. Its slot freed: part of the
// reply, then the end; the datapath forgets the connection, and a new one
// is answered (by the other rules) and by the application.
func TestAdvTCPRestRuleDeleted(t *testing.T) {
	for _, freed := range []bool{false, true} {
		t.Run(fmt.Sprintf("freed=%v", freed), func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
			defer r.back()
			id, err := r.d.AddRule(r.svc, tcpRule(bigReq, bigReply))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.d.AddRule(r.svc, tcpRule(hotReq, hotReply)); err != nil {
				t.Fatal(err)
			}
			capSendBuffer(t, r, 4096)
			c := dialSmallReceiveBuffer(t, r)
			if !freed {
				holdReclaimer(t, r.d)
			}
			writeEach(t, c, bigReq, hotReq)
			waitAnswered(t, r, 1)
			slot := r.d.slotOf(id)
			gen := atomic.LoadUint32(r.d.store.gens.of(slot))
			if err := r.d.DeleteRules([]model.RuleID{id}); err != nil {
				t.Fatal(err)
			}
			if !freed {
				time.Sleep(100 * time.Millisecond)
				expectStream(t, c, append(bytes.Clone(bigReply), hotReply...))
				exchange(t, c, []byte(bigReq), []byte("APP:"+bigReq))
				ps, _ := r.d.PathStats()
				if ps["tcp_reply_rest"] == 0 || ps["tcp_reply_broken"] != 0 {
					t.Errorf("paths %v: want reply_rest some, reply_broken 0", ps)
				}
				return
			}
			if !eventually(5*time.Second, 10*time.Millisecond, func() bool { return atomic.LoadUint32(r.d.store.gens.of(slot)) != gen }) {
				t.Fatal("the deleted rule's slot was not freed")
			}
			got := expectPrefixThenEnd(t, c, bigReply)
			ps, _ := r.d.PathStats()
			t.Logf("got %d of %d bytes, then the end; paths %v", len(got), len(bigReply), ps)
			if len(got) == len(bigReply) || ps["tcp_reply_broken"] != 1 {
				t.Errorf("got %d bytes (want a part), reply_broken %d (want 1)", len(got), ps["tcp_reply_broken"])
			}
			c.Close()
			expectConnEntries(t, r, 0)
			c2 := r.dial(t, "tcp4")
			exchange(t, c2, []byte(hotReq), hotReply)
			exchange(t, c2, []byte(bigReq), []byte("APP:"+bigReq))
		})
	}
}

// 3b. The service is unregistered, or its listener closed, while a reply
// is cut. Unregistered with its slots kept: the reply whole, then the
// application's answers to the requests behind it. Unregistered and freed: a part of
// the reply, then the end, never another byte. The listener closed (still
// registered): the reply whole, and the connection still served.
func TestAdvTCPRestServiceGoes(t *testing.T) {
	for _, how := range []string{"removed, slots kept", "removed, slots freed", "listener closed"} {
		t.Run(how, func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
			defer r.back()
			r.addRules(t)
			capSendBuffer(t, r, 4096)
			c := dialSmallReceiveBuffer(t, r)
			if how == "removed, slots kept" {
				holdReclaimer(t, r.d)
			}
			writeEach(t, c, bigReq, hotReq, midReq)
			waitAnswered(t, r, 1)
			want := append(append(bytes.Clone(bigReply), hotReply...), midReply...)
			switch how {
			case "listener closed":
				r.ln.Close()
				time.Sleep(100 * time.Millisecond)
				expectStream(t, c, want)
				exchange(t, c, []byte(hotReq), hotReply)
			case "removed, slots kept":
				if err := r.d.RemoveService(r.svc); err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
				// The requests bounced behind the cut reply find no
				// service: the application answers them
				// (tcp_reply_fallback), after the reply.
				expectStream(t, c, append(bytes.Clone(bigReply), "APP:"+hotReq+"APP:"+midReq...))
				exchange(t, c, []byte(hotReq), []byte("APP:"+hotReq))
			default:
				if err := r.d.RemoveService(r.svc); err != nil {
					t.Fatal(err)
				}
				time.Sleep(500 * time.Millisecond) // the grace period, the slots freed
				got := expectPrefixThenEnd(t, c, want)
				t.Logf("got %d of %d bytes, then the end", len(got), len(want))
			}
			ps, _ := r.d.PathStats()
			t.Logf("paths %v", ps)
			if ps["tcp_reply_rest"] == 0 {
				t.Errorf("tcp_reply_rest 0, want some")
			}
			c.Close()
			expectConnEntries(t, r, 0)
		})
	}
}

// 4. Many connections at once, each through a small window, pipelining
// large replies with a copy processor that puts the connection's own
// request bytes at the reply's end: rests of different connections are
// built on the same CPUs, interleaved. Each client reads exactly its own.
func TestAdvTCPRestManyConnectionsWithCopies(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	// "Q" + 4 bytes of the client's + "/big\n": 10 bytes, the pattern at
	// its end; the 4 bytes at the reply's end, and at its middle.
	cr := rule.Rule{Condition: rule.Condition{Offset: 5, Pattern: []byte("/big\n"), MinLen: 10, MaxLen: 10},
		Processors: []rule.Processor{rule.Put(0, bigReply), rule.Copy(1, 4, uint16(len(bigReply)-4)),
			rule.Copy(1, 4, uint16(len(bigReply)/2+3))},
		ReplyLen: uint16(len(bigReply))}
	if _, err := r.d.AddRule(r.svc, cr); err != nil {
		t.Fatal(err)
	}
	capSendBuffer(t, r, 8192)
	const conns, each = 32, 3
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = dialSmallReceiveBuffer(t, r)
	}
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("%04d", i)
			req := "Q" + id + "/big\n"
			reply := bytes.Clone(bigReply)
			copy(reply[len(reply)-4:], id)
			copy(reply[len(reply)/2+3:], id)
			for range each {
				if _, err := c.Write([]byte(req)); err != nil {
					errs <- err
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(time.Duration(i%5) * 40 * time.Millisecond)
			want := bytes.Repeat(reply, each)
			got, err := readWithin(c, len(want), 15*time.Second)
			if err != nil || !bytes.Equal(got, want) {
				at := 0
				for at < len(got) && got[at] == want[at] {
					at++
				}
				errs <- fmt.Errorf("connection %d: read %d of %d (%v), first difference at %d: %q", i, len(got), len(want), err, at, trim(got[at:]))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ps, _ := r.d.PathStats()
	t.Logf("paths %v", ps)
	if ps["tcp_answered"] != conns*each || ps["tcp_reply_rest"] == 0 || ps["tcp_reply_broken"] != 0 {
		t.Errorf("answered %d (want %d), reply_rest %d (want some), reply_broken %d",
			ps["tcp_answered"], conns*each, ps["tcp_reply_rest"], ps["tcp_reply_broken"])
	}
	for _, c := range cs {
		c.Close()
	}
	expectConnEntries(t, r, 0)
}

// 5. The application writes on the connection (a message of its own: a
// server push, a keep-alive) while a kernel reply is cut: a short message,
// and one longer than what is left of the reply. The rest of the reply
// goes in front of the message: the client gets the reply whole, then the
// message whole, never the message inside the reply, never the request;
// and the kernel answers the next request.
func TestAdvTCPRestApplicationWritesWhileCut(t *testing.T) {
	long := append(bytes.Repeat([]byte("P"), 60000), '\n')
	for name, msg := range map[string][]byte{"short": []byte("PUSH: a message of the application's own\n"), "long": long} {
		t.Run(name, func(t *testing.T) { applicationWritesWhileCut(t, msg) })
	}
}

func applicationWritesWhileCut(t *testing.T, msg []byte) {
	ln, back := listenInNewNetns(t, "tcp4", "127.0.0.1:0")
	defer back()
	push := make(chan struct{})
	app := &appServer{ln: ln, accepted: make(chan struct{}, 4)}
	r := &tcpRig{d: openTest(t), ln: ln.(*net.TCPListener), app: app, addr: ln.Addr().String(), back: back}
	r.register(t)
	r.addRules(t)
	capSendBuffer(t, r, 4096)
	wrote := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		app.accepted <- struct{}{}
		<-push
		_, err = c.Write(msg)
		wrote <- err
		io.Copy(io.Discard, c) // reads nothing while the kernel answers
	}()
	c := dialSmallReceiveBuffer(t, r)
	writeEach(t, c, bigReq)
	waitAnswered(t, r, 1)
	time.Sleep(50 * time.Millisecond)
	close(push)
	time.Sleep(100 * time.Millisecond)
	want := append(bytes.Clone(bigReply), msg...)
	got, err := readWithin(c, len(want), 3*time.Second)
	ps, _ := r.d.PathStats()
	var werr error
	select {
	case werr = <-wrote:
	case <-time.After(time.Second):
		werr = errors.New("still writing")
	}
	t.Logf("application's write: %v; read %d bytes (%v); answered %d, reply_rest %d, reply_broken %d",
		werr, len(got), err, ps["tcp_answered"], ps["tcp_reply_rest"], ps["tcp_reply_broken"])
	if !bytes.Equal(got, want) || werr != nil {
		t.Fatalf("read %d bytes, want %d: the reply, then the message (written: %v). Got: %s",
			len(got), len(want), werr, describeStream(got, msg))
	}
	if ps["tcp_rest_before_app"] == 0 {
		t.Errorf("tcp_rest_before_app 0: the reply's rest did not go in front of the message")
	}
	exchange(t, c, []byte(hotReq), hotReply)
	if ps, _ := r.d.PathStats(); ps["tcp_reply_broken"] != 0 {
		t.Errorf("tcp_reply_broken %d", ps["tcp_reply_broken"])
	}
}

// describeStream tells what a stream holds: runs of the reply (from which
// byte of it), of the message, and of anything else.
func describeStream(got, msg []byte) string {
	var out []string
	replyAt := 0 // where the next reply bytes are expected
	msgAt := 0
	for i := 0; i < len(got); {
		switch {
		case msgAt < len(msg) && bytes.HasPrefix(got[i:], msg[msgAt:msgAt+1]) && (replyAt >= len(bigReply) || got[i] != bigReply[replyAt]):
			j := i
			for j < len(got) && msgAt < len(msg) && got[j] == msg[msgAt] {
				j, msgAt = j+1, msgAt+1
			}
			out = append(out, fmt.Sprintf("message bytes %d..%d", msgAt-(j-i), msgAt))
			i = j
		case replyAt < len(bigReply) && got[i] == bigReply[replyAt]:
			j := i
			for j < len(got) && replyAt < len(bigReply) && got[j] == bigReply[replyAt] {
				j, replyAt = j+1, replyAt+1
			}
			out = append(out, fmt.Sprintf("reply bytes %d..%d", replyAt-(j-i), replyAt))
			i = j
		default:
			// Not where the reply was: find where in it these bytes are
			// (its pattern repeats every 16 bytes), or tell them.
			if bytes.HasSuffix(bigReply, got[i:]) {
				from := len(bigReply) - (len(got) - i)
				out = append(out, fmt.Sprintf("reply bytes %d..%d (%d skipped)", from, len(bigReply), from-replyAt))
				i = len(got)
				continue
			}
			if k := bytes.Index(got[i:], []byte(bigReq)); k == 0 {
				out = append(out, fmt.Sprintf("the raw request %q", bigReq))
				i += len(bigReq)
				continue
			}
			if off := (replyAt / 16) * 16; replyAt < len(bigReply) {
				for d := 1; d < 16; d++ {
					if got[i] == bigReply[(off+d)%16] {
						replyAt += (d - replyAt%16 + 16) % 16
						break
					}
				}
				if replyAt < len(bigReply) && got[i] == bigReply[replyAt] {
					out = append(out, fmt.Sprintf("(reply bytes skipped up to %d)", replyAt))
					continue
				}
			}
			out = append(out, fmt.Sprintf("other bytes %q", trim(got[i:min(len(got), i+40)])))
			i = len(got)
		}
	}
	return fmt.Sprint(out)
}

// 6. Replies a few bytes longer than what the send buffer takes at once:
// when fewer bytes of the reply are left than the request has, the send
// reports part of the request sent, and the worker sends the request's
// last bytes alone; the rest is built from a message that holds only the
// request's end (and a copy processor reads the whole request at the head
// of the sockmap queue). A sweep of reply lengths around the sizes TCP
// takes: every reply whole.
func TestAdvTCPRestReplyLengthSweep(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	capSendBuffer(t, r, 4096)
	type ask struct {
		req   string
		reply []byte
	}
	var asks []ask
	for _, base := range []int{4096, 8192, 12288, 16384} {
		for k := -2; k <= 12; k++ {
			n := base + k
			req := fmt.Sprintf("GET /%05d\n", n) // 11 bytes
			tmpl := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
			rl := tcpRule(req, tmpl)
			rl.Processors = append(rl.Processors, rule.Copy(5, 5, uint16(n-5)))
			if _, err := r.d.AddRule(r.svc, rl); err != nil {
				t.Fatal(err)
			}
			reply := bytes.Clone(tmpl)
			copy(reply[n-5:], req[5:10])
			asks = append(asks, ask{req, reply})
		}
	}
	for i, a := range asks {
		c := dialSmallReceiveBuffer(t, r)
		writeEach(t, c, a.req, a.req)
		time.Sleep(30 * time.Millisecond)
		want := append(bytes.Clone(a.reply), a.reply...)
		got, err := readWithin(c, len(want), 5*time.Second)
		if err != nil || !bytes.Equal(got, want) {
			at := 0
			for at < len(got) && got[at] == want[at] {
				at++
			}
			ps, _ := r.d.PathStats()
			t.Fatalf("ask %d (%q, %d bytes): read %d of %d (%v), first difference at %d: %q; paths: rest %d broken %d",
				i, a.req, len(a.reply), len(got), len(want), err, at, trim(got[at:]), ps["tcp_reply_rest"], ps["tcp_reply_broken"])
		}
		c.Close()
	}
	ps, _ := r.d.PathStats()
	t.Logf("answered %d, reply_rest %d, reply_broken %d", ps["tcp_answered"], ps["tcp_reply_rest"], ps["tcp_reply_broken"])
	if ps["tcp_reply_rest"] == 0 || ps["tcp_reply_broken"] != 0 || ps["tcp_answered"] != uint64(2*len(asks)) {
		t.Errorf("want answered %d, reply_rest some, reply_broken 0", 2*len(asks))
	}
	expectConnEntries(t, r, 0)
}

// 7. An upgrade across this change: the earlier santad's connections map
// holds the earlier struct santa_conn (32 bytes, without the open reply).
// The starting santad's handover reads only the entries' head: an idle
// connection of the earlier layout moves in, with its listener, and the
// kernel answers it from then on. (If the handover could not load, every
// connection of the earlier run would stay on the earlier data plane and
// its rules for good.)
func TestAdvTCPHandOverFromEarlierConnLayout(t *testing.T) {
	ln, back := listenInNewNetns(t, "tcp4", "127.0.0.1:0")
	defer back()
	r := &tcpRig{d: openTest(t), ln: ln.(*net.TCPListener), app: &appServer{ln: ln}, addr: ln.Addr().String(), back: back}
	r.register(t)
	r.addRules(t)
	c, err := net.Dial("tcp4", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exchange(t, c, []byte(hotReq), hotReply)

	// The connection as an earlier santad of the 32-byte layout held it:
	// out of this data plane, into maps of that layout.
	var cookie uint64
	control(t, s.(*net.TCPConn))(func(fd uintptr) { cookie, err = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE) })
	if err != nil {
		t.Fatal(err)
	}
	var cur santaTcpSantaConn
	if err := r.d.tcp.objs.Connections.Lookup(cookie, &cur); err != nil {
		t.Fatalf("the connection is not under Santa: %v", err)
	}
	if err := errors.Join(r.d.tcp.objs.TcpConns.Delete(cookie), r.d.tcp.objs.Connections.Delete(cookie)); err != nil {
		t.Fatal(err)
	}
	r.d.tcp.owners.give(cur.Owner)
	conns, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 8, ValueSize: 32, MaxEntries: 16, Flags: unix.BPF_F_NO_PREALLOC})
	if err != nil {
		t.Fatal(err)
	}
	sockets, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.SockHash, KeySize: 8, ValueSize: 8, MaxEntries: 16})
	if err != nil {
		conns.Close()
		t.Fatal(err)
	}
	prev := &connMaps{connections: conns, sockets: sockets}
	defer prev.Close()
	head := unsafe.Slice((*byte)(unsafe.Pointer(&cur)), 32)
	if err := conns.Put(cookie, head); err != nil {
		t.Fatal(err)
	}
	control(t, s.(*net.TCPConn))(func(fd uintptr) { err = sockets.Update(cookie, uint64(fd), ebpf.UpdateNoExist) })
	if err != nil {
		t.Fatal(err)
	}

	r.d.tcp.mu.Lock()
	got, err := r.d.tcp.handOver(prev, 0, 1)
	r.d.tcp.mu.Unlock()
	if err != nil {
		t.Fatalf("handing over from a connections map of the earlier layout (32-byte values; now %d): %v",
			unsafe.Sizeof(santaTcpSantaConn{}), err)
	}
	if got != (model.HandOver{Moved: 1}) {
		t.Fatalf("handed over %+v; want the one connection moved", got)
	}
	var moved santaTcpSantaConn
	if err := r.d.tcp.objs.Connections.Lookup(cookie, &moved); err != nil || moved.Listener != cur.Listener || moved.Reply.Len != 0 {
		t.Fatalf("after the handover: %+v, %v; want listener %d and no open reply", moved, err, cur.Listener)
	}
	before, _ := r.d.PathStats()
	exchange(t, c, []byte(hotReq), hotReply)
	if after, _ := r.d.PathStats(); after["tcp_answered"] != before["tcp_answered"]+1 {
		t.Errorf("the moved connection's request was not answered by the kernel")
	}
}
