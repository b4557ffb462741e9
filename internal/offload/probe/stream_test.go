package probe_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/dnsmsg/dnstest"
	"github.com/santa-offload/santa/internal/offload/probe"
)

func openStreams(t *testing.T) *probe.Streams {
	s := probe.OpenStreams("")
	t.Cleanup(func() { s.Close() })
	return s
}

// zoneOf200 serves h0..h199.example.com, hI at 192.0.2.I.
func zoneOf200(srv *dnstest.Server) {
	var records []dnstest.RR
	for i := range 200 {
		records = append(records, dnstest.A(fmt.Sprintf("h%d.example.com", i), 192, 0, 2, byte(i)))
	}
	srv.SetZone(dnstest.Zone{Apex: "example.com", Serial: 1, Records: records})
}

// askH asks hI over s and checks that the reply answers that question.
func askH(s *probe.Streams, dst netip.AddrPort, i int, timeout time.Duration) error {
	q := dnstest.Query(0, 0, fmt.Sprintf("h%d.example.com", i), dnstest.TypeA)
	r, err := s.Ask(context.Background(), dst, q, timeout)
	if err != nil {
		return err
	}
	m, err := dnsmsg.CheckReply(append(r[:2:2], q[2:]...), r)
	if err == nil && m.Answer[0].Data[3] != byte(i) {
		err = fmt.Errorf("h%d got the answer of h%d", i, m.Answer[0].Data[3])
	}
	return err
}

// TestStreamPipelined asks 200 names at once over TCP, IPv4 and IPv6: one
// connection each, every ask gets its own answer.
func TestStreamPipelined(t *testing.T) {
	s := openStreams(t)
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		srv := dnstest.NewServer(t, addr)
		zoneOf200(srv)
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- askH(s, srv.Addr(), i, 5*time.Second)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("%s: %v", addr, err)
			}
		}
		if srv.TCPAsked() != 200 {
			t.Fatalf("%s: the server got %d queries over TCP; want 200", addr, srv.TCPAsked())
		}
	}
	if s.Sent() != 400 {
		t.Errorf("Sent = %d; want 400", s.Sent())
	}
}

// TestStreamRedials: a connection the server closed is dialled again at
// the next ask; a server that takes no connection is ErrNoStream; one
// that does not answer is ErrTimeout.
func TestStreamRedials(t *testing.T) {
	s := openStreams(t)
	srv := dnstest.NewServer(t, "127.0.0.1:0")
	zoneOf200(srv)
	if err := askH(s, srv.Addr(), 1, time.Second); err != nil {
		t.Fatal(err)
	}
	srv.Drop(func(*dnsmsg.Message) bool { return true })
	if err := askH(s, srv.Addr(), 2, 50*time.Millisecond); !errors.Is(err, probe.ErrTimeout) {
		t.Fatalf("ask of a server that does not answer = %v; want ErrTimeout", err)
	}
	srv.Drop(nil)
	srv.CloseTCP() // closes the connection too
	if err := askH(s, srv.Addr(), 3, time.Second); !errors.Is(err, probe.ErrNoStream) {
		t.Fatalf("ask after the server closed TCP = %v; want ErrNoStream", err)
	}
	// A new server on another port takes connections again.
	srv2 := dnstest.NewServer(t, "127.0.0.1:0")
	zoneOf200(srv2)
	closed := dnstest.NewServer(t, "127.0.0.1:0")
	closed.CloseTCP()
	if err := askH(s, closed.Addr(), 4, time.Second); !errors.Is(err, probe.ErrNoStream) {
		t.Fatalf("ask of a server without TCP = %v; want ErrNoStream", err)
	}
	if err := askH(s, srv2.Addr(), 5, time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestStreamServerClosesIdle: a server that closes the connection between
// asks (an idle timeout) is dialled again, whether the close was seen
// before the next ask or only by it.
func TestStreamServerClosesIdle(t *testing.T) {
	s := openStreams(t)
	srv := dnstest.NewServer(t, "127.0.0.1:0")
	zoneOf200(srv)
	for i := range 4 {
		if err := askH(s, srv.Addr(), i, 5*time.Second); err != nil {
			t.Fatalf("ask %d: %v", i, err)
		}
		srv.CloseTCPConns()
		if i%2 == 0 {
			time.Sleep(20 * time.Millisecond) // the close is seen before the next ask
		}
	}
	if srv.TCPAsked() != 4 {
		t.Fatalf("the server got %d queries over TCP; want 4", srv.TCPAsked())
	}
}
