package datapath

// With a real memcached (memcached_tcp_test.go's): UDP writes through the
// data plane attached to the namespace's loopback, held until memcached's
// reply or their deadline; delayed flush_all over TCP, held until
// memcached has flushed.

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/model"
)

// mcUDPConn is a UDP client of memcached.
type mcUDPConn struct{ c *net.UDPConn }

func (m *mcTCP) udpClient(t testing.TB) *mcUDPConn {
	t.Helper()
	if _, err := m.d.Attach("lo"); err != nil {
		t.Fatal(err)
	}
	raddr, err := net.ResolveUDPAddr("udp", m.addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &mcUDPConn{c: c}
}

func (c *mcUDPConn) send(t testing.TB, id uint16, cmd string) {
	t.Helper()
	if _, err := c.c.Write(mcFrame(id, cmd)); err != nil {
		t.Fatal(err)
	}
}

// expect reads one datagram: frame id, sequence 0 of 1, then want.
func (c *mcUDPConn) expect(t testing.TB, id uint16, want string) {
	t.Helper()
	buf := make([]byte, 2048)
	c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.c.Read(buf)
	if wantFrame := mcReplyFrame(id, 0, 1, want); err != nil || !bytes.Equal(buf[:n], wantFrame) {
		t.Fatalf("memcached said %q (%v), want %q", buf[:n], err, wantFrame)
	}
}

// A write over UDP is in flight from its arrival to its reply, as over
// TCP (TestMemcachedTCPInFlight): a rule built meanwhile, with the
// generation read meanwhile (memcached held still by SIGSTOP), never
// answers, and the write is done before its STORED reaches the client,
// well before its deadline.
func TestMemcachedUDPInFlight(t *testing.T) {
	m := newMcTCP(t)
	c := m.udpClient(t)
	m.inFlightWindow(t, func() { c.send(t, 9, "set k 0 0 3\r\nnew\r\n") }, func() { c.expect(t, 9, "STORED\r\n") }, false)
	s, err := m.d.MemcachedStats(m.tcp)
	if err != nil {
		t.Fatal(err)
	}
	if s.Writes != 1 || s.UDPHeld != 1 || s.Completed != 1 || s.UDPTimedOut != 0 {
		t.Fatalf("counters %+v: want one UDP write held and completed by its reply", s)
	}
}

// A noreply write over UDP, which memcached does without a word, stays
// in flight to its deadline, then is bumped.
func TestMemcachedUDPNoreply(t *testing.T) {
	m := newMcTCP(t)
	c := m.udpClient(t)
	before := m.generation(t, "k")
	start := time.Now()
	c.send(t, 10, "set k 0 0 3 noreply\r\nnew\r\n")
	if !eventually(time.Second, time.Millisecond, func() bool { return m.generation(t, "k").InFlight }) {
		t.Fatal("the noreply set is not in flight")
	}
	// memcached's two worker threads read its UDP socket both: a get may
	// be done before the set that came first.
	buf := make([]byte, 2048)
	for id := uint16(11); ; id++ {
		c.send(t, id, "get k\r\n")
		c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(buf[:n], mcReplyFrame(id, 0, 1, "VALUE k 0 3\r\nnew\r\nEND\r\n")) {
			break // memcached has done it
		}
		if time.Since(start) > 500*time.Millisecond {
			t.Fatalf("memcached has not done the set after %v: %q", time.Since(start), buf[:n])
		}
	}
	if !m.generation(t, "k").InFlight {
		t.Fatal("a noreply write left flight before its deadline")
	}
	if !eventually(3*time.Second, 5*time.Millisecond, func() bool { return !m.generation(t, "k").InFlight }) {
		t.Fatal("not released at its deadline")
	}
	if took := time.Since(start); took < time.Duration(santaSantaMcLayoutSANTA_MC_UDP_HOLD_MS)*time.Millisecond {
		t.Fatalf("released after %v", took)
	}
	if after := m.generation(t, "k"); after.Gen < before.Gen+2 {
		t.Fatalf("released without its bump: %+v, before %+v", after, before)
	}
	if s, _ := m.d.MemcachedStats(m.tcp); s.UDPTimedOut != 1 {
		t.Fatalf("counters %+v: want one UDP write timed out", s)
	}
}

// flushed polls memcached over c until a get of key finds nothing, and
// calls during at each poll before: what must hold while memcached has
// not flushed.
func flushed(t *testing.T, c *mcClient, key string, within time.Duration, during func()) {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		during()
		c.send(t, "get "+key+"\r\n")
		c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "END\r\n" {
			return
		}
		readValueRest(t, c.r)
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("memcached did not flush %s within %v", key, within)
}

// readValueRest reads the data and END of a one-value get reply.
func readValueRest(t *testing.T, r *bufio.Reader) {
	t.Helper()
	for _, want := range []string{"", "END\r\n"} {
		line, err := r.ReadString('\n')
		if err != nil || (want != "" && line != want) {
			t.Fatalf("memcached said %q (%v)", line, err)
		}
	}
}

// A delayed flush_all over TCP: from its OK until memcached has flushed
// (its clock past the delay) and its clock's slack after, nothing of the
// domain answers and Generation says in flight; the domain is bumped
// then, so a rule built during the delay never answers.
func TestMemcachedTCPDelayedFlush(t *testing.T) {
	m := newMcTCP(t)
	c := m.client(t)
	c.send(t, "set k 0 0 3\r\nold\r\n")
	c.expect(t, "STORED")
	c.send(t, "flush_all 2\r\n")
	c.expect(t, "OK")
	ok := time.Now()
	during := m.generation(t, "k")
	m.guard(t, "k", "old", during)
	flushed(t, c, "k", 5*time.Second, func() {
		if !m.generation(t, "k").InFlight {
			t.Fatal("the domain was let go before memcached flushed")
		}
		m.get(t, "k", "")
	})
	if !m.generation(t, "k").InFlight {
		t.Fatal("the domain was let go as memcached flushed")
	}
	if !eventually(5*time.Second, 10*time.Millisecond, func() bool { return !m.generation(t, "k").InFlight }) {
		t.Fatal("the domain is still held")
	}
	if took := time.Since(ok); took < 2500*time.Millisecond {
		t.Fatalf("the domain was let go %v after the OK of a flush delayed by 2 s", took)
	}
	m.get(t, "k", "")
	if s, _ := m.d.MemcachedStats(m.tcp); s.DelayedFlush != 1 {
		t.Fatalf("counters %+v: want one delayed flush", s)
	}
}

// memcached keeps only its last flush_all's time: whichever order two
// delays come in, the domain stays held until memcached has flushed.
func TestMemcachedTCPFlushOrder(t *testing.T) {
	for _, order := range [][2]string{{"3", "1"}, {"1", "3"}} {
		t.Run(order[0]+"_then_"+order[1], func(t *testing.T) {
			m := newMcTCP(t)
			c := m.client(t)
			c.send(t, "set k 0 0 3\r\nold\r\n")
			c.expect(t, "STORED")
			first := time.Now()
			for _, d := range order {
				c.send(t, "flush_all "+d+"\r\n")
				c.expect(t, "OK")
			}
			flushed(t, c, "k", 6*time.Second, func() {
				if !m.generation(t, "k").InFlight {
					t.Fatal("the domain was let go before memcached flushed")
				}
			})
			// Held until the longest delay and the slack after it: 3 + 1
			// s after the OKs, whichever came last.
			time.Sleep(time.Until(first.Add(3500 * time.Millisecond)))
			if !m.generation(t, "k").InFlight {
				t.Fatalf("let go %v after the first OK, before the longest delay", time.Since(first))
			}
			if !eventually(5*time.Second, 10*time.Millisecond, func() bool { return !m.generation(t, "k").InFlight }) {
				t.Fatal("the domain is still held")
			}
		})
	}
}

// ownCgroup makes a cgroup v2 directory for the test, removed after it
// (once what the test put in it has ended).
func ownCgroup(t testing.TB) string {
	t.Helper()
	root, err := cgroup2Root(model.DefaultCgroupPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, fmt.Sprintf("santa-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	return dir
}

// What seeing memcached's UDP replies costs: the egress hook's kernel
// time per reply memcached sends (BPF run-time statistics, which add
// about 60 ns of their own), with memcached in a cgroup of its own, so
// that the hook runs on its packets alone; and XDP's per packet on the
// namespace's loopback (requests and replies both pass it). Sets
// (STORED releases each) and gets of a key set (VALUE releases nothing),
// over UDP, one at a time, with the UDP socket registered plain and as a
// memcached service. RESULT lines; nothing of speed is asserted.
func BenchmarkMemcachedUDPReplies(b *testing.B) {
	for _, parsed := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "memcached"}[parsed]
		b.Run(name, func(b *testing.B) {
			m := startMcBench(b, ownCgroup(b), parsed, func(m *mcTCP) []model.ServiceID { return []model.ServiceID{m.tcp, m.svc} })
			c := m.udpClient(b)
			progs := map[string]*ebpf.Program{"egress": m.d.objs.SantaMcUdpReply, "xdp": m.d.objs.SantaUdp}
			for _, phase := range []struct{ name, cmd, reply string }{
				{"set", "set key:0001 0 0 16\r\n0123456789abcdef\r\n", "STORED\r\n"},
				{"get", "get key:0001\r\n", "VALUE key:0001 0 16\r\n0123456789abcdef\r\nEND\r\n"},
			} {
				label := func(prog string) string { return "memcached_udp_replies/" + phase.name + "/" + prog + "/" + name }
				printRunTimes(b, progs, label, func() {
					for i := range b.N {
						c.send(b, uint16(i), phase.cmd)
						c.expect(b, uint16(i), phase.reply)
					}
				})
			}
		})
	}
}
