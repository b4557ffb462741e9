package probe_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/dnsmsg/dnstest"
	"github.com/santa-offload/santa/internal/offload/probe"
)

func open(t *testing.T, concurrency int) *probe.Socket {
	s, err := probe.Open("", concurrency)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestAskIPv4AndIPv6(t *testing.T) {
	p := open(t, 4)
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		srv := dnstest.NewServer(t, addr)
		srv.SetZone(dnstest.Zone{Apex: "example.com", Serial: 1, Records: []dnstest.RR{dnstest.A("www.example.com", 192, 0, 2, 1)}})
		q := dnstest.Query(0, 0, "www.example.com", dnstest.TypeA)
		r, err := p.Ask(context.Background(), srv.Addr(), q, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		m, err := dnsmsg.CheckReply(append(r[:2:2], q[2:]...), r)
		if err != nil || len(m.Answer) != 1 {
			t.Fatalf("%s: reply %x: %v", addr, r, err)
		}
	}
	if p.Sent() != 2 {
		t.Errorf("Sent = %d; want 2", p.Sent())
	}
}

func TestAskTimeout(t *testing.T) {
	p := open(t, 1)
	srv := dnstest.NewServer(t, "127.0.0.1:0")
	srv.Drop(func(*dnsmsg.Message) bool { return true })
	_, err := p.Ask(context.Background(), srv.Addr(), dnstest.Query(0, 0, "a.", dnstest.TypeA), 50*time.Millisecond)
	if !errors.Is(err, probe.ErrTimeout) {
		t.Fatalf("Ask = %v; want ErrTimeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Ask(ctx, srv.Addr(), dnstest.Query(0, 0, "a.", dnstest.TypeA), time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ask with a cancelled context = %v", err)
	}
}

// TestAskConcurrent asks many names at once through few slots: each ask
// gets the answer to its own question.
func TestAskConcurrent(t *testing.T) {
	p := open(t, 8)
	srv := dnstest.NewServer(t, "127.0.0.1:0")
	var records []dnstest.RR
	for i := range 200 {
		records = append(records, dnstest.A(fmt.Sprintf("h%d.example.com", i), 192, 0, 2, byte(i)))
	}
	srv.SetZone(dnstest.Zone{Apex: "example.com", Serial: 1, Records: records})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := dnstest.Query(0, 0, fmt.Sprintf("h%d.example.com", i), dnstest.TypeA)
			r, err := p.Ask(context.Background(), srv.Addr(), q, 5*time.Second)
			if err == nil {
				var m *dnsmsg.Message
				m, err = dnsmsg.CheckReply(append(r[:2:2], q[2:]...), r)
				if err == nil && m.Answer[0].Data[3] != byte(i) {
					err = fmt.Errorf("h%d got the answer of h%d", i, m.Answer[0].Data[3])
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestStrangerCannotAnswer sends a reply with every possible id from
// another socket while an ask waits for a server that never answers: none
// is taken, since none comes from the server's address.
func TestStrangerCannotAnswer(t *testing.T) {
	p := open(t, 1)
	srv := dnstest.NewServer(t, "127.0.0.1:0")
	srv.Drop(func(*dnsmsg.Message) bool { return true })
	stranger, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	q := dnstest.Query(0, 0, "a.", dnstest.TypeA)
	done := make(chan error)
	go func() {
		_, err := p.Ask(context.Background(), srv.Addr(), q, 2*time.Second)
		done <- err
	}()
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), p.Port())
	forged := append([]byte{0, 0, 0x84, 0}, q[4:]...)
	for id := range 65536 {
		binary.BigEndian.PutUint16(forged, uint16(id))
		stranger.WriteToUDPAddrPort(forged, to)
	}
	if err := <-done; !errors.Is(err, probe.ErrTimeout) {
		t.Fatalf("Ask = %v; want ErrTimeout", err)
	}
}

func TestOpenRefusesBadConcurrency(t *testing.T) {
	for _, c := range []int{0, probe.MaxConcurrency + 1} {
		if s, err := probe.Open("", c); err == nil {
			s.Close()
			t.Errorf("Open accepts concurrency %d", c)
		}
	}
}
