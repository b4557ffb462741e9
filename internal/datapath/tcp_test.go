package datapath

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/daemon"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/rule"
	"github.com/santa-offload/santa/test/droponce"
)

// tcpRig is a listener registered with Santa in a network namespace of its
// own, and a way to dial it from there.
type tcpRig struct {
	d    *Datapath
	ln   *net.TCPListener
	app  *appServer
	svc  model.ServiceID
	addr string
	back func() // leaves the namespace
}

// listenInNewNetns enters a network namespace of its own, with loopback
// up, and listens there on addr. The caller leaves the namespace with back.
func listenInNewNetns(t *testing.T, network, addr string) (ln net.Listener, back func()) {
	t.Helper()
	back = enterNewNetns(t)
	if err := exec("ip", "link", "set", "lo", "up"); err != nil {
		back()
		t.Fatal(err)
	}
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false) // Go's default for listeners; MPTCP is not served
	ln, err := lc.Listen(context.Background(), network, addr)
	if err != nil {
		back()
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, back
}

func newTCPRig(t *testing.T, network, listen string, app appServer) *tcpRig {
	t.Helper()
	ln, back := listenInNewNetns(t, network, listen)
	app.ln, app.accepted = ln, make(chan struct{}, 16)
	r := &tcpRig{d: openTest(t), ln: ln.(*net.TCPListener), app: &app, addr: ln.Addr().String(), back: back}
	r.register(t)
	go r.app.serve()
	return r
}

// register makes the listener a service (again).
func (r *tcpRig) register(t *testing.T) {
	t.Helper()
	var err error
	control(t, r.ln)(func(fd uintptr) { r.svc, err = r.d.AddSocket(int(fd)) })
	if err != nil {
		r.back()
		t.Fatalf("registering the listener: %v", err)
	}
}

// adopt adopts the connections the listener accepted, as santad does for
// an admin.
func (r *tcpRig) adopt() (model.Adopted, error) {
	info, err := r.d.Service(r.svc)
	if err != nil {
		return model.Adopted{}, err
	}
	return daemon.AdoptConnections(r.d, r.svc, info, "", model.AnyUID)
}

// exchange sends req, if any, and reads exactly len(want) bytes back.
func exchange(t *testing.T, c net.Conn, req, want []byte) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if len(req) > 0 {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("request %q: reading %d bytes: %v (got %q)", req, len(want), err, got)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("request %q: reply %q, want %q", req, trim(got), trim(want))
	}
}

func trim(b []byte) []byte {
	if len(b) > 80 {
		return append(b[:80:80], "..."...)
	}
	return b
}

func tcpRule(req string, reply []byte) rule.Rule {
	return rule.Rule{Condition: rule.Condition{Pattern: []byte(req)},
		Processors: []rule.Processor{rule.Put(0, reply)}, ReplyLen: uint16(len(reply))}
}

var (
	hotReq, midReq, bigReq = "GET /hot\n", "GET /mid\n", "GET /big\n"
	hotReply               = []byte("HOT!\n")
	midReply               = bytes.Repeat([]byte("m"), 900)
	bigReply               = bytes.Repeat([]byte("0123456789abcdef"), 4096)[:rule.MaxTCPReply]
	kernelReplies          = map[string][]byte{hotReq: hotReply, midReq: midReply, bigReq: bigReply}
)

func (r *tcpRig) addRules(t *testing.T) {
	t.Helper()
	for req, reply := range kernelReplies {
		if _, err := r.d.AddRule(r.svc, tcpRule(req, reply)); err != nil {
			t.Fatal(err)
		}
	}
}

// The kernel answers matched requests (replies from 5 B to 64 KiB), the
// application the rest, and after its first answer every later one.
func TestTCPAnswers(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	c := r.dial(t, "tcp4")
	exchange(t, c, []byte(hotReq), hotReply)
	exchange(t, c, []byte(bigReq), bigReply)
	exchange(t, c, []byte(midReq), midReply)
	exchange(t, c, []byte(hotReq), hotReply)
	exchange(t, c, []byte("miss\n"), []byte("APP:miss\n"))
	exchange(t, c, []byte(hotReq), []byte("APP:"+hotReq))
	r.expectCounts(t, 4, 2, 2)
	r.expectNothingUnread(t)
}

// A reply longer than its request leaves in one segment, as the
// application's own write would (loopback's MTU fits 900 B in one): the
// reply program builds it in one message element, which TCP sends with one
// call. Built as the request's bytes plus pushed ones, two elements, it
// was two segments, and the peer acknowledged each.
func TestTCPReplyIsOneSegment(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	c := r.dial(t, "tcp4")
	for i := range 3 {
		before := dataSegmentsIn(t, c)
		exchange(t, c, []byte(midReq), midReply)
		if got := dataSegmentsIn(t, c) - before; got != 1 {
			t.Fatalf("reply %d came in %d data segments, want 1", i, got)
		}
	}
}

// dataSegmentsIn is how many segments carrying data c has received.
func dataSegmentsIn(t *testing.T, c net.Conn) uint32 {
	t.Helper()
	var info *unix.TCPInfo
	var err error
	control(t, c.(*net.TCPConn))(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if err != nil {
		t.Fatal(err)
	}
	return info.Data_segs_in
}

// A request that arrives while the application is inside a receive call
// on its connection passes (santa_app_receiving): when it blocks in one,
// and when the request came before accept() and the application's first
// call on the connection is a receive (accept() without the peer's
// address, then recv: the first receive runs the verdict on it). The
// connection is the application's from then on, and nothing stays counted
// as unread.
func TestTCPApplicationReceiving(t *testing.T) {
	for name, app := range map[string]appServer{
		"blocking receive": {blocking: true},
		"before accept":    {acceptDelay: 200 * time.Millisecond, bare: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", app)
			defer r.back()
			r.addRules(t)
			c := r.connect(t, "tcp4")
			if app.blocking {
				r.waitAccepted(t)
				time.Sleep(50 * time.Millisecond) // the application blocks in read()
			}
			exchange(t, c, []byte(hotReq), []byte("APP:"+hotReq))
			exchange(t, c, []byte(midReq), []byte("APP:"+midReq))
			r.expectCounts(t, 0, 2, 2)
			if ps, _ := r.d.PathStats(); ps["tcp_app_receiving"] != 1 {
				t.Errorf("tcp_app_receiving %d, want 1", ps["tcp_app_receiving"])
			}
			r.expectNothingUnread(t)
		})
	}
}

// A request that arrived before accept() is answered by the kernel when
// the application's first call on the connection, before its first
// receive, is one Santa hooks: accept() itself when it asks for the
// peer's address (nginx, Go, memcached: the kernel runs getpeername's
// hooks), SANTA_SO_ACCEPTED (the announcement for applications that
// call nothing else), any other setsockopt, getpeername or getsockname.
// The verdict runs in that call, where a bounce is safe.
func TestTCPEarlyRequestsAnsweredAtFirstCall(t *testing.T) {
	announce := func(fd int) { client.AnnounceAcceptedFD(fd) }
	nodelay := func(fd int) { unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) }
	getpeername := func(fd int) { unix.Getpeername(fd) }
	getsockname := func(fd int) { unix.Getsockname(fd) }
	for name, app := range map[string]appServer{
		"accept with address": {bare: true, peer: true},
		"SANTA_SO_ACCEPTED":   {bare: true, first: announce},
		"setsockopt":          {bare: true, first: nodelay},
		"getpeername":         {bare: true, first: getpeername},
		"getsockname":         {bare: true, first: getsockname},
	} {
		for _, network := range []string{"tcp4", "tcp6"} {
			t.Run(name+"/"+network, func(t *testing.T) {
				listen := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
				app.acceptDelay = 200 * time.Millisecond
				r := newTCPRig(t, network, listen, app)
				defer r.back()
				r.addRules(t)
				c := r.connect(t, network)
				c.Write([]byte(hotReq)) // before the application accepts
				r.waitAccepted(t)
				exchange(t, c, nil, hotReply)
				exchange(t, c, []byte(midReq), midReply)
				exchange(t, c, []byte("miss\n"), []byte("APP:miss\n"))
				r.expectCounts(t, 2, 1, 1)
				if ps, _ := r.d.PathStats(); ps["tcp_app_receiving"] != 0 {
					t.Errorf("tcp_app_receiving %d, want 0", ps["tcp_app_receiving"])
				}
				r.expectNothingUnread(t)
				if name == "SANTA_SO_ACCEPTED" {
					expectAnnounceIgnored(t, network, listen)
				}
			})
		}
	}
}

// expectAnnounceIgnored checks that announcing a connection that is not
// Santa's does nothing (and succeeds), and that other options still reach
// the kernel through santa_tcp_accepted.
func expectAnnounceIgnored(t *testing.T, network, listen string) {
	t.Helper()
	other, err := net.Listen(network, listen)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	dc, err := net.Dial(network, other.Addr().String()) // from this thread: it is in the namespace
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	oc, err := other.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	if err := client.AnnounceAccepted(oc.(*net.TCPConn)); err != nil {
		t.Errorf("announcing a connection that is not Santa's: %v", err)
	}
	var rcvbuf int
	control(t, oc.(*net.TCPConn))(func(fd uintptr) {
		if err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 50000); err == nil {
			rcvbuf, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		}
	})
	if err != nil || rcvbuf != 100000 { // the kernel doubles it
		t.Errorf("SO_RCVBUF 50000 reads back %d, %v; want 100000", rcvbuf, err)
	}
}

// dial connects to the rig's listener and waits until the application
// accepted the connection.
func (r *tcpRig) dial(t *testing.T, network string) net.Conn {
	t.Helper()
	c := r.connect(t, network)
	r.waitAccepted(t)
	return c
}

// waitAccepted waits until the application accepted one more connection.
func (r *tcpRig) waitAccepted(t *testing.T) {
	t.Helper()
	select {
	case <-r.app.accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the application did not accept the connection")
	}
}

func (r *tcpRig) connect(t *testing.T, network string) net.Conn {
	t.Helper()
	c, err := net.Dial(network, r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectNothingUnread checks that no connection of the rig's listener has
// bytes counted as received and not read (ss's Recv-Q).
func (r *tcpRig) expectNothingUnread(t *testing.T) {
	t.Helper()
	conns, err := procsock.EstablishedTCP("", netip.MustParseAddrPort(r.addr).Port())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		if c.RecvQ != 0 {
			t.Errorf("a connection has %d bytes unread", c.RecvQ)
		}
	}
}

// expectCounts checks the service's counters and that every bounced
// request became a reply. Passed counts segments: one may hold several
// requests (or part of one), so it is checked against a range.
func (r *tcpRig) expectCounts(t *testing.T, matched, minPassed, maxPassed uint64) {
	t.Helper()
	st, err := r.d.ServiceStats(r.svc)
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := r.d.PathStats()
	if st.Matched != matched || st.Passed < minPassed || st.Passed > maxPassed || ps["tcp_bounced"] != ps["tcp_answered"] {
		t.Errorf("matched %d passed %d, want %d and %d..%d; paths %v", st.Matched, st.Passed, matched, minPassed, maxPassed, ps)
	}
}

// IPv6, and IPv4 clients of a dual-stack listener; half-closes too.
func TestTCPAddressFamilies(t *testing.T) {
	for _, c := range []struct{ listen, dial string }{
		{"[::1]:0", "tcp6"}, {"[::]:0", "tcp4"}, {"0.0.0.0:0", "tcp4"},
	} {
		t.Run(c.listen+" "+c.dial, func(t *testing.T) {
			network := "tcp"
			if c.listen == "0.0.0.0:0" {
				network = "tcp4"
			}
			r := newTCPRig(t, network, c.listen, appServer{})
			defer r.back()
			r.addRules(t)
			_, port, _ := net.SplitHostPort(r.addr)
			r.addr = net.JoinHostPort(map[string]string{"tcp4": "127.0.0.1", "tcp6": "::1"}[c.dial], port)
			conn := r.dial(t, c.dial)
			exchange(t, conn, []byte(hotReq), hotReply)
			exchange(t, conn, []byte("miss\n"), []byte("APP:miss\n"))
			r.expectCounts(t, 1, 1, 1)
			r.expectHalfClosesAnswered(t, c.dial, 5)
		})
	}
}

// Pipelined mixes: requests written back to back (or with short pauses,
// so that segments split and merge differently), replies read afterwards.
// Every request's reply comes in request order, from the kernel only
// until the application answered one.
func TestTCPPipelinedOrder(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := []string{hotReq, midReq, hotReq, "miss\n", "other\n"}
	kernel, app := 0, 0
	for round := range 200 {
		c := r.dial(t, "tcp4")
		var sent []string
		for range 1 + rng.IntN(12) {
			req := reqs[rng.IntN(len(reqs))]
			if round%2 == 1 && rng.IntN(3) == 0 {
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			}
			if _, err := c.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			sent = append(sent, req)
		}
		k, a := readInOrder(t, c, sent)
		kernel += k
		app += a
		c.Close()
	}
	t.Logf("%d replies by the kernel, %d by the application", kernel, app)
	r.expectCounts(t, uint64(kernel), min(uint64(app), 1), uint64(app))
}

// readInOrder reads the replies to sent, in order: each the kernel's (only
// before any of the application's) or the application's. It returns how
// many each gave.
func readInOrder(t *testing.T, c net.Conn, sent []string) (kernel, app int) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	in := bufio.NewReader(c)
	for i, req := range sent {
		want, byKernel := []byte("APP:"+req), false
		if k, ok := kernelReplies[req]; ok && app == 0 {
			head, err := in.Peek(min(len(k), 4))
			if err != nil {
				t.Fatalf("reply %d of %q: %v", i, sent, err)
			}
			if !bytes.HasPrefix(want, head) {
				want, byKernel = k, true
			}
		}
		got := make([]byte, len(want))
		if _, err := io.ReadFull(in, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("reply %d of %q: %q, %v; want %q", i, sent, trim(got), err, trim(want))
		}
		if byKernel {
			kernel++
		} else {
			app++
		}
	}
	return kernel, app
}

// Partial requests and segments holding two requests pass to the
// application, whole.
func TestTCPPassesWhatIsNotOneRequest(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	c := r.dial(t, "tcp4")
	c.Write([]byte("GET /h"))
	time.Sleep(50 * time.Millisecond)
	exchange(t, c, []byte("ot\n"), []byte("APP:"+hotReq))

	c = r.dial(t, "tcp4")
	exchange(t, c, []byte(hotReq+hotReq), []byte("APP:"+hotReq+"APP:"+hotReq))
	r.expectCounts(t, 0, 2, 3) // the partial request may arrive in two segments or one
}

// Half-close and reset: after a half-close the client gets the whole reply
// and then the end (the FIN is held back while the reply is in the
// kernel's hands, santa_tcp_hold_fin); a reset connection leaves nothing
// behind.
func TestTCPCloseAndReset(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	r.expectHalfClosesAnswered(t, "tcp4", 20)

	// The request and the FIN in one segment (corked, then shut): the
	// application answers it, before it sees the end.
	c := r.dial(t, "tcp4").(*net.TCPConn)
	control(t, c)(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, 1) })
	c.Write([]byte(hotReq))
	c.CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if all, err := io.ReadAll(c); err != nil || string(all) != "APP:"+hotReq {
		t.Fatalf("request and FIN in one segment: %q, %v; want %q then the end", all, err, "APP:"+hotReq)
	}
	if ps, _ := r.d.PathStats(); ps["tcp_fin"] != 1 {
		t.Errorf("tcp_fin %d, want 1", ps["tcp_fin"])
	}

	for range 50 {
		c := r.dial(t, "tcp4").(*net.TCPConn)
		c.Write([]byte(bigReq))
		c.SetLinger(0)
		c.Close()
	}
	exchange(t, r.dial(t, "tcp4"), []byte(hotReq), hotReply)
	ps, _ := r.d.PathStats()
	if ps["tcp_reply_broken"] != 0 {
		t.Errorf("paths %v", ps)
	}
}

// A client that half-closes and does not read its replies keeps the
// sockmap worker waiting for room to send: its FIN is held back for
// SANTA_FIN_HOLD_MS at most, then the server's side sees the end of the
// stream as it would without Santa, not never.
func TestTCPFinHeldAtMostASecond(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	// Send buffers of 64 KiB at most in the rig's namespace, and a small
	// receive buffer never read: the replies (30 × 64 KiB) fill both, and
	// the worker waits with most of them.
	if err := os.WriteFile("/proc/sys/net/ipv4/tcp_wmem", []byte("4096 16384 65536"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := r.dial(t, "tcp4").(*net.TCPConn)
	control(t, c)(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	for range 30 {
		c.Write([]byte(bigReq))
	}
	time.Sleep(100 * time.Millisecond)
	c.CloseWrite()
	port := netip.MustParseAddrPort(r.addr).Port()
	ended := eventually(5*time.Second, 50*time.Millisecond, func() bool {
		conns, err := procsock.EstablishedTCP("", port)
		if err != nil {
			t.Fatal(err)
		}
		return len(conns) == 0
	})
	if !ended {
		ps, _ := r.d.PathStats()
		t.Fatalf("the server's side is still established 5 s after the client's FIN; paths %v", ps)
	}
	if ps, _ := r.d.PathStats(); ps["tcp_fin_held"] == 0 {
		t.Errorf("the FIN was not held back while the replies waited: paths %v", ps)
	}
}

// eventually checks cond every step until it holds or within has passed,
// and tells whether it held.
func eventually(within, step time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(within); !cond(); time.Sleep(step) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// expectHalfClosesAnswered checks that n clients that send a matched
// request and at once shut their sending side each get the whole reply,
// then the end.
func (r *tcpRig) expectHalfClosesAnswered(t *testing.T, network string, n int) {
	t.Helper()
	for i := range n {
		c := r.dial(t, network).(*net.TCPConn)
		r.expectHalfCloseAnswered(t, c, i, hotReply)
	}
	ps, _ := r.d.PathStats()
	t.Logf("%d half-closed connections answered; FINs held back: %d", n, ps["tcp_fin_held"])
}

// expectHalfCloseAnswered sends a matched request on c and at once shuts
// its sending side, and checks that one of the replies wanted comes whole,
// then the end. It returns which.
func (r *tcpRig) expectHalfCloseAnswered(t *testing.T, c *net.TCPConn, i int, want ...[]byte) int {
	t.Helper()
	c.Write([]byte(hotReq))
	c.CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	all, err := io.ReadAll(c)
	for w := range want {
		if err == nil && bytes.Equal(all, want[w]) {
			return w
		}
	}
	ps, _ := r.d.PathStats()
	t.Fatalf("connection %d, after half-close: %q, %v; want one of %q then the end; paths %v", i, all, err, want, ps)
	return -1
}

// Half-closed connections whose request and FIN most often arrive before
// accept(): the kernel answers inside accept() (or the application does,
// once the FIN came first), and the client gets the whole reply, then the
// end, as from the application alone.
func TestTCPHalfCloseBeforeAccept(t *testing.T) {
	for name, app := range map[string]appServer{"Go": {}, "bare": {bare: true, peer: true}} {
		t.Run(name, func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", app)
			defer r.back()
			r.addRules(t)
			byApp := 0
			for i := range 100 {
				byApp += r.expectHalfCloseAnswered(t, r.connect(t, "tcp4").(*net.TCPConn), i, hotReply, []byte("APP:"+hotReq))
				r.waitAccepted(t)
			}
			ps, _ := r.d.PathStats()
			t.Logf("100 half-closed connections: %d answered by the application; FINs held back: %d", byApp, ps["tcp_fin_held"])
		})
	}
}

// Data that arrives out of order passes, and with it the connection: the
// first of two matched requests is lost once on the way in (drop_once),
// the second waits in the out-of-order queue until the retransmission of
// the first fills the gap. The application answers both, in order, and
// the next one.
func TestTCPOutOfOrderPasses(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	drop, err := droponce.Attach("lo", [4]byte([]byte(hotReq)))
	if err != nil {
		t.Fatal(err)
	}
	defer drop.Close()
	c := r.dial(t, "tcp4")
	for range 2 {
		if _, err := c.Write([]byte(hotReq)); err != nil {
			t.Fatal(err)
		}
	}
	if kernel, app := readInOrder(t, c, []string{hotReq, hotReq}); kernel != 0 || app != 2 {
		t.Errorf("%d replies by the kernel, %d by the application; want the application's", kernel, app)
	}
	if dropped, err := drop.Dropped(); err != nil || !dropped {
		t.Fatalf("no segment dropped (%v): nothing arrived out of order", err)
	}
	exchange(t, c, []byte(hotReq), []byte("APP:"+hotReq))
	ps, _ := r.d.PathStats()
	if ps["tcp_out_of_order"] != 1 || ps["tcp_passing"] != 2 || ps["tcp_bounced"] != 0 {
		t.Errorf("paths %v; want the retransmission passed as out of order, then the connection passing", ps)
	}
	r.expectNothingUnread(t)
}

// A connection accepted before its listener was registered is adopted when
// idle, and answered from then on; its state goes when the application
// closes it, though sock_ops never asked for its state callback
// (santa_tcp_release).
func TestTCPAdoptConnections(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	if err := r.d.RemoveService(r.svc); err != nil {
		t.Fatal(err)
	}
	before := r.dial(t, "tcp4")
	exchange(t, before, []byte("miss\n"), []byte("APP:miss\n"))
	r.register(t)
	r.addRules(t)
	got, err := r.adopt()
	if err != nil || got.Adopted != 1 || len(got.Skipped) != 0 {
		t.Fatalf("adopted %+v, %v; want the one connection", got, err)
	}
	exchange(t, before, []byte(hotReq), hotReply)
	before.Close() // the application closes its end on EOF
	if !eventually(2*time.Second, 20*time.Millisecond, func() bool {
		var cookie uint64
		return !r.d.tcp.objs.Connections.Iterate().Next(&cookie, new(santaTcpSantaConn))
	}) {
		t.Error("the adopted connection's state outlived its socket")
	}
}

// An unregistered listener's connections leave the sockhash: a request
// reaches the application, and once the listener is registered again, the
// connection, idle, can be adopted and answered by the kernel again.
func TestTCPRemovedListenerReleasesConnections(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	r.addRules(t)
	c := r.dial(t, "tcp4")
	exchange(t, c, []byte(hotReq), hotReply)
	if err := r.d.RemoveService(r.svc); err != nil {
		t.Fatal(err)
	}
	var cookie uint64
	if it := r.d.tcp.objs.TcpConns.Iterate(); it.Next(&cookie, new(uint64)) {
		t.Fatalf("connection %d is still in the sockhash", cookie)
	}
	exchange(t, c, []byte(hotReq), []byte("APP:"+hotReq))
	r.register(t)
	r.addRules(t)
	// Idle once the client acknowledged the application's reply.
	var got model.Adopted
	var err error
	if !eventually(2*time.Second, 20*time.Millisecond, func() bool {
		got, err = r.adopt()
		return err == nil && got.Adopted == 1
	}) {
		t.Fatalf("adopted %+v, %v; want the connection back", got, err)
	}
	exchange(t, c, []byte(hotReq), hotReply)
	r.expectNothingUnread(t)
}

// churnHotRule adds the hot rule and deletes it again, over and over,
// until stop, which says how many times. The caller stops it on every way
// out (defer): a churn that outlives the test would use the datapath
// after its cleanup closed it.
func churnHotRule(t *testing.T, r *tcpRig) (stop func() int) {
	quit := make(chan struct{})
	churned := make(chan int, 1)
	go func() {
		n := 0
		defer func() { churned <- n }()
		for ; ; n++ {
			select {
			case <-quit:
				return
			default:
			}
			id, err := r.d.AddRule(r.svc, tcpRule(hotReq, hotReply))
			if err == nil {
				err = r.d.DeleteRule(id)
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	return sync.OnceValue(func() int { close(quit); return <-churned })
}

// A rule deleted and added again under traffic: every request is answered
// once, by the kernel or (from the first time the rule was missing, in the
// verdict or later in the reply program) by the application, and nothing
// stays counted as unread.
func TestTCPRulesChangeUnderTraffic(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	if _, err := r.d.AddRule(r.svc, tcpRule(midReq, midReply)); err != nil {
		t.Fatal(err)
	}
	stopChurn := churnHotRule(t, r)
	defer stopChurn()
	kernel, app := 0, 0
	for range 100 {
		c := r.dial(t, "tcp4")
		for i := range 20 {
			req := []string{hotReq, midReq}[i%2]
			if _, err := c.Write([]byte(req)); err != nil {
				t.Fatal(err)
			}
			k, a := readInOrder(t, c, []string{req})
			kernel, app = kernel+k, app+a
		}
	}
	ps, _ := r.d.PathStats()
	t.Logf("%d rule changes; %d replies by the kernel, %d by the application; %d fell back in the reply program",
		stopChurn(), kernel, app, ps["tcp_reply_fallback"])
	r.expectNothingUnread(t)
}
