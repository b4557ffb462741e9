package datapath

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/rules"
)

// appServer answers every line it reads (a request ends with "\n") with
// "APP:" and the line: a stand-in for the application, whose answers tell
// its path from the kernel's.
type appServer struct {
	ln          net.Listener
	acceptDelay time.Duration
}

func (s *appServer) serve() {
	for {
		time.Sleep(s.acceptDelay)
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			in := bufio.NewReader(c)
			for {
				line, err := in.ReadBytes('\n')
				if err != nil {
					return
				}
				if _, err := c.Write(append([]byte("APP:"), line...)); err != nil {
					return
				}
			}
		}()
	}
}

// tcpRig is a listener registered with Santa in a network namespace of its
// own, and a way to dial it from there.
type tcpRig struct {
	d    *Datapath
	ln   *net.TCPListener
	svc  ServiceID
	addr string
	back func() // leaves the namespace
}

func newTCPRig(t *testing.T, network, listen string, acceptDelay time.Duration) *tcpRig {
	t.Helper()
	back := enterNewNetns(t)
	if err := exec("ip", "link", "set", "lo", "up"); err != nil {
		back()
		t.Fatal(err)
	}
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false) // Go's default for listeners; MPTCP is not served
	ln, err := lc.Listen(context.Background(), network, listen)
	if err != nil {
		back()
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := &tcpRig{d: openTest(t), ln: ln.(*net.TCPListener), addr: ln.Addr().String(), back: back}
	r.register(t)
	go (&appServer{ln: ln, acceptDelay: acceptDelay}).serve()
	return r
}

// register makes the listener a service (again).
func (r *tcpRig) register(t *testing.T) {
	t.Helper()
	var err error
	control(t, r.ln)(func(fd uintptr) { r.svc, err = r.d.AddService(int(fd)) })
	if err != nil {
		r.back()
		t.Fatalf("registering the listener: %v", err)
	}
}

// exchange sends req and reads exactly len(want) bytes back.
func exchange(t *testing.T, c net.Conn, req, want []byte) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
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

func tcpRule(req string, reply []byte) rules.Rule {
	return rules.Rule{Condition: rules.Condition{Pattern: []byte(req)},
		Processors: []rules.Processor{rules.Put(0, reply)}, ReplyLen: uint16(len(reply))}
}

var (
	hotReq, midReq, bigReq = "GET /hot\n", "GET /mid\n", "GET /big\n"
	hotReply               = []byte("HOT!\n")
	midReply               = bytes.Repeat([]byte("m"), 900)
	bigReply               = bytes.Repeat([]byte("0123456789abcdef"), 4096)[:rules.MaxTCPReply]
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
// application the rest, and after its first answer every later one. Also
// when the request arrives before the application accepted the connection.
func TestTCPAnswers(t *testing.T) {
	for _, delay := range []time.Duration{0, 200 * time.Millisecond} {
		t.Run(fmt.Sprintf("accept after %v", delay), func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", delay)
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
		})
	}
}

func (r *tcpRig) dial(t *testing.T, network string) net.Conn {
	t.Helper()
	c, err := net.Dial(network, r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
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

// IPv6, and IPv4 clients of a dual-stack listener.
func TestTCPAddressFamilies(t *testing.T) {
	for _, c := range []struct{ listen, dial string }{
		{"[::1]:0", "tcp6"}, {"[::]:0", "tcp4"}, {"0.0.0.0:0", "tcp4"},
	} {
		t.Run(c.listen+" "+c.dial, func(t *testing.T) {
			network := "tcp"
			if c.listen == "0.0.0.0:0" {
				network = "tcp4"
			}
			r := newTCPRig(t, network, c.listen, 0)
			defer r.back()
			r.addRules(t)
			_, port, _ := net.SplitHostPort(r.addr)
			r.addr = net.JoinHostPort(map[string]string{"tcp4": "127.0.0.1", "tcp6": "::1"}[c.dial], port)
			conn := r.dial(t, c.dial)
			exchange(t, conn, []byte(hotReq), hotReply)
			exchange(t, conn, []byte("miss\n"), []byte("APP:miss\n"))
			r.expectCounts(t, 1, 1, 1)
		})
	}
}

// Pipelined mixes: requests written back to back (or with short pauses,
// so that segments split and merge differently), replies read afterwards.
// Every request's reply comes in request order, from the kernel only
// until the application answered one.
func TestTCPPipelinedOrder(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", 0)
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
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", 0)
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

// Half-close and reset: the kernel's reply still arrives before the
// application sees the end; a reset connection leaves nothing behind.
func TestTCPCloseAndReset(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", 0)
	defer r.back()
	r.addRules(t)
	c := r.dial(t, "tcp4").(*net.TCPConn)
	c.Write([]byte(hotReq))
	c.CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	all, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(all, hotReply) {
		t.Fatalf("after half-close: %q, %v; want %q then the end", all, err, hotReply)
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

// A connection accepted before its listener was registered is adopted when
// idle, and answered from then on.
func TestTCPAdoptConnections(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", 0)
	defer r.back()
	r.addRules(t)
	if err := r.d.RemoveService(r.svc); err != nil {
		t.Fatal(err)
	}
	before := r.dial(t, "tcp4")
	exchange(t, before, []byte("miss\n"), []byte("APP:miss\n"))
	r.register(t)
	r.addRules(t)
	got, err := r.d.AdoptConnections(r.svc, "")
	if err != nil || got.Adopted != 1 || len(got.Skipped) != 0 {
		t.Fatalf("adopted %+v, %v; want the one connection", got, err)
	}
	exchange(t, before, []byte(hotReq), hotReply)
}
