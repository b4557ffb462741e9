package datapath

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/rules"
)

// appServer answers every read with "APP:" and what it read: a stand-in for
// the application, whose answers tell its path from the kernel's.
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
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				if _, err := c.Write(append([]byte("APP:"), buf[:n]...)); err != nil {
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
	d := openTest(t)
	var svc ServiceID
	var aerr error
	control(t, ln.(*net.TCPListener))(func(fd uintptr) { svc, aerr = d.AddService(int(fd)) })
	if aerr != nil {
		back()
		t.Fatalf("registering the listener: %v", aerr)
	}
	go (&appServer{ln: ln, acceptDelay: acceptDelay}).serve()
	return &tcpRig{d: d, svc: svc, addr: ln.Addr().String(), back: back}
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

func TestTCPSmoke(t *testing.T) {
	for _, delay := range []time.Duration{0, 200 * time.Millisecond} {
		t.Run(fmt.Sprintf("accept after %v", delay), func(t *testing.T) {
			r := newTCPRig(t, "tcp4", "127.0.0.1:0", delay)
			defer r.back()
			big := bytes.Repeat([]byte("0123456789abcdef"), 4096)[:65535]
			for _, rule := range []rules.Rule{tcpRule("GET /hot\r\n", []byte("HOT!\n")),
				tcpRule("GET /big\r\n", big), tcpRule("GET /mid\r\n", bytes.Repeat([]byte("m"), 900))} {
				if _, err := r.d.AddRule(r.svc, rule); err != nil {
					t.Fatal(err)
				}
			}
			c, err := net.Dial("tcp4", r.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			exchange(t, c, []byte("GET /hot\r\n"), []byte("HOT!\n"))
			exchange(t, c, []byte("GET /big\r\n"), big)
			exchange(t, c, []byte("GET /mid\r\n"), bytes.Repeat([]byte("m"), 900))
			exchange(t, c, []byte("GET /hot\r\n"), []byte("HOT!\n"))
			exchange(t, c, []byte("miss"), []byte("APP:miss"))
			exchange(t, c, []byte("GET /hot\r\n"), []byte("APP:GET /hot\r\n"))
			st, _ := r.d.ServiceStats(r.svc)
			ps, _ := r.d.PathStats()
			t.Logf("service %+v paths %v", st, ps)
		})
	}
}
