package datapath

// UDP writes in flight (docs/memcached.md, "UDP writes in flight"): a
// write's datagram through XDP (BPF_PROG_TEST_RUN) is held from then on;
// replies sent for real from the service's socket pass the cgroup egress
// hook (santa_mc_udp_reply), which releases the write its reply names, and
// reach the client unchanged.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/pkttest"
)

// A UDP client of the memcached service m, on 127.0.0.2.
type mcUDPClient struct {
	c    *net.UDPConn
	addr netip.AddrPort
}

func newMcUDPClient(t testing.TB) *mcUDPClient { return newMcUDPClientOn(t, "127.0.0.2:0") }

// newMcUDPClientOn is a client bound to addr.
func newMcUDPClientOn(t testing.TB, addr string) *mcUDPClient {
	t.Helper()
	c := boundUDP(t, addr)
	return &mcUDPClient{c: c, addr: local(c)}
}

// write runs the client's datagram (frame id, payload) through XDP: passed.
func (m *mcUDP) write(t *testing.T, from *mcUDPClient, id uint16, payload string) {
	t.Helper()
	frame := pkttest.UDPFrame{SrcMAC: clientMAC, DstMAC: serverMAC, Src: from.addr, Dst: local(m.c),
		Payload: mcFrame(id, payload), TTL: 17, IPID: 77}
	if verdict, _ := run(t, m.d.XDPProgram(), frame.Bytes()); verdict != xdpPass {
		t.Fatalf("%q: verdict %d, want pass", payload, verdict)
	}
}

// reply sends a frame from the service's socket to the client, for real
// (through the egress hook), and checks that it arrives unchanged.
func (m *mcUDP) reply(t *testing.T, to *mcUDPClient, frame []byte) {
	t.Helper()
	if _, err := m.c.WriteToUDPAddrPort(frame, to.addr); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	to.c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := to.c.Read(buf)
	if err != nil || !bytes.Equal(buf[:n], frame) {
		t.Fatalf("the client got %q (%v), want %q", buf[:n], err, frame)
	}
}

// mcReplyFrame is a reply frame of request id, sequence seq of total.
func mcReplyFrame(id, seq, total uint16, payload string) []byte {
	return append([]byte{byte(id >> 8), byte(id), byte(seq >> 8), byte(seq), byte(total >> 8), byte(total), 0, 0}, payload...)
}

// udpKey is the key of the client's write with request id.
func (m *mcUDP) udpKey(from netip.AddrPort, id uint16) santaSantaMcUdpKey {
	k := santaSantaMcUdpKey{Domain: uint32(m.svc), Id: binary.NativeEndian.Uint16([]byte{byte(id >> 8), byte(id)})}
	port := from.Port()
	k.Port = binary.NativeEndian.Uint16([]byte{byte(port >> 8), byte(port)})
	a := from.Addr().As16()
	for i := range k.Addr {
		k.Addr[i] = binary.NativeEndian.Uint32(a[4*i:])
	}
	return k
}

// held is the client's write with request id in the table, if it is.
func (m *mcUDP) held(t *testing.T, from *mcUDPClient, id uint16) (santaSantaMcUdpWrite, bool) {
	t.Helper()
	var w santaSantaMcUdpWrite
	err := m.d.objs.McUdpWrites.Lookup(m.udpKey(from.addr, id), &w)
	return w, err == nil
}

func (m *mcUDP) slotOf(t *testing.T, key string) santaSantaMcSlot {
	t.Helper()
	var s santaSantaMcSlot
	if err := m.d.objs.McSlots.Lookup(mcSlot([]byte(key), m.svc), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func (m *mcUDP) domainState(t testing.TB) santaSantaMcDomain {
	t.Helper()
	var d santaSantaMcDomain
	if err := m.d.objs.McDomains.Lookup(uint32(m.svc), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

const (
	udpLive  = 1 // SANTA_MC_UDP_LIVE
	udpTimed = 2 // SANTA_MC_UDP_TIMED
	udpHold  = time.Duration(santaSantaMcLayoutSANTA_MC_UDP_HOLD_MS) * time.Millisecond
)

// A text write over UDP is in flight, its key's slot held, until the
// first frame of a reply only a write gets, with its request id, leaves
// for its client; then bumped again. A rule built in between never
// answers. Frames that do not name it (another id, another client, a
// later frame, a read's reply) leave it held. Every reply reaches the
// client unchanged.
func TestMemcachedUDPWriteHeldUntilReply(t *testing.T) {
	for _, c := range []struct{ write, reply string }{
		{"set k 0 0 1\r\nB\r\n", "STORED\r\n"}, {"add k 0 0 1\r\nB\r\n", "NOT_STORED\r\n"},
		{"cas k 0 0 1 9\r\nB\r\n", "EXISTS\r\n"}, {"delete k\r\n", "NOT_FOUND\r\n"},
		{"delete k\r\n", "DELETED\r\n"}, {"touch k 10\r\n", "TOUCHED\r\n"}, {"incr k 5\r\n", "15\r\n"},
	} {
		t.Run(c.write[:6]+c.reply[:4], func(t *testing.T) {
			m := newMcUDP(t)
			cl, other := newMcUDPClient(t), newMcUDPClient(t)
			before := m.slotOf(t, "k")
			m.write(t, cl, 7, c.write)
			w, ok := m.held(t, cl, 7)
			if now := monotonicNow(); w.Deadline < now || w.Deadline > now+uint64(udpHold) {
				t.Fatalf("held until %d, now %d: want within %v", w.Deadline, now, udpHold)
			}
			want := santaSantaMcUdpWrite{Deadline: w.Deadline, Domain: uint32(m.svc), Slot: mcSlot([]byte("k"), m.svc), State: udpLive}
			if !ok || w != want {
				t.Fatalf("held %v %+v, want %+v", ok, w, want)
			}
			if s := m.slotOf(t, "k"); s != (santaSantaMcSlot{Gen: before.Gen + 1, Inflight: 1}) {
				t.Fatalf("slot %+v after the write's arrival (before %+v)", s, before)
			}
			during := m.guarded(t, "k", "old", time.Time{})
			m.expectGet(t, "k", "")

			for _, f := range []struct {
				to    *mcUDPClient
				frame []byte
			}{
				{cl, mcReplyFrame(8, 0, 1, c.reply)},                       // another request id
				{other, mcReplyFrame(7, 0, 1, c.reply)},                    // another client
				{cl, mcReplyFrame(7, 1, 2, c.reply)},                       // not a reply's first frame
				{cl, mcReplyFrame(7, 0, 1, "END\r\n")},                     // a read's
				{cl, mcReplyFrame(7, 0, 1, "VALUE k 0 1\r\nB\r\nEND\r\n")}, // a read's
				{cl, mcReplyFrame(7, 0, 1, "SERVER_ERROR out of memory\r\n")},
				{cl, []byte{0, 7, 0, 0, 0, 1, 0}}, // shorter than a frame header
			} {
				m.reply(t, f.to, f.frame)
				if _, ok := m.held(t, cl, 7); !ok {
					t.Fatalf("released by %q to %v", f.frame, f.to.addr)
				}
			}
			m.reply(t, cl, mcReplyFrame(7, 0, 1, c.reply))
			if _, ok := m.held(t, cl, 7); ok {
				t.Fatal("still held after its reply")
			}
			if s := m.slotOf(t, "k"); s != (santaSantaMcSlot{Gen: before.Gen + 2}) {
				t.Fatalf("slot %+v after the reply (before %+v)", s, before)
			}
			m.expectGet(t, "k", "") // built in flight: its generation is old
			m.d.DeleteRule(during)
			m.guarded(t, "k", "new", time.Time{})
			m.expectGet(t, "k", "new")
			if s := m.stats(t); s.Writes != 1 || s.UDPHeld != 1 || s.Completed != 1 || s.UDPTimedOut != 0 || s.KeyBumps != 2 {
				t.Fatalf("counters %+v", s)
			}
		})
	}
}

// Over IPv6 too: the write is held under the client's full address, and
// its reply names it by its destination.
func TestMemcachedUDPWriteHeldIPv6(t *testing.T) {
	m := newMcUDPOn(t, "[::1]:0")
	cl := newMcUDPClientOn(t, "[::1]:0")
	m.write(t, cl, 0x0102, "delete k\r\n")
	if w, ok := m.held(t, cl, 0x0102); !ok || w.State != udpLive || w.Slot != mcSlot([]byte("k"), m.svc) {
		t.Fatalf("held %v %+v", ok, w)
	}
	m.reply(t, cl, mcReplyFrame(0x0102, 0, 1, "DELETED\r\n"))
	if _, ok := m.held(t, cl, 0x0102); ok {
		t.Fatal("still held after its reply")
	}
	if s := m.slotOf(t, "k"); s.Inflight != 0 || s.Gen != 2 {
		t.Fatalf("slot %+v: want bumped twice, not in flight", s)
	}
}

// A datagram that loses sync may hold writes memcached does (it answers
// an unknown command with ERROR and goes on): its domain is held as a
// write would be, then bumped.
func TestMemcachedUDPLostHolds(t *testing.T) {
	for _, w := range []string{"bogus\r\nset k 0 0 1\r\nB\r\n", "\x80\x01\x00\x01", "set k 0 0 5\r\nAB"} {
		t.Run(fmt.Sprintf("%q", w), func(t *testing.T) {
			m := newMcUDP(t)
			cl := newMcUDPClient(t)
			m.write(t, cl, 1, w)
			if d := m.domainState(t); d.HoldUntil == 0 || d.Gen != 1 {
				t.Fatalf("domain %+v: want bumped and held", d)
			}
			m.guarded(t, "k", "old", time.Time{})
			m.expectGet(t, "k", "")
			m.settled(t, 5*time.Second)
			m.expectGet(t, "k", "")
			if d := m.domainState(t); d.HoldUntil != 0 || d.Gen != 2 {
				t.Fatalf("domain %+v: want bumped again, not held", d)
			}
		})
	}
}

// A write no reply can be told of (noreply, meta, gat, a datagram of
// several commands, flush_all) is held to its deadline
// (SANTA_MC_UDP_HOLD_MS), whatever replies leave, then released with a
// bump.
func TestMemcachedUDPHeldToDeadline(t *testing.T) {
	const hold = udpHold
	for _, c := range []struct {
		write  string
		domain bool // held domain-wide
	}{
		{"set k 0 0 1 noreply\r\nB\r\n", false}, {"ms k 1\r\nB\r\n", false}, {"gat 10 k\r\n", false},
		{"get x\r\nset k 0 0 1\r\nB\r\n", false}, {"delete k\r\ndelete j\r\n", true}, {"flush_all\r\n", true},
	} {
		t.Run(c.write[:6], func(t *testing.T) {
			m := newMcUDP(t)
			cl := newMcUDPClient(t)
			before, dom := m.slotOf(t, "k"), m.domainState(t)
			start := time.Now()
			m.write(t, cl, 3, c.write)
			w, ok := m.held(t, cl, 3)
			slot := mcSlot([]byte("k"), m.svc)
			if c.domain {
				slot = uint32(santaSantaMcLayoutSANTA_MC_NO_SLOT)
			}
			if !ok || w.State != udpTimed || w.Slot != slot {
				t.Fatalf("held %v %+v, want timed, slot %#x", ok, w, slot)
			}
			m.reply(t, cl, mcReplyFrame(3, 0, 1, "STORED\r\n"))
			if _, ok := m.held(t, cl, 3); !ok {
				t.Fatal("released by a reply")
			}
			if !eventually(hold+2*time.Second, 5*time.Millisecond, func() bool { _, ok := m.held(t, cl, 3); return !ok }) {
				t.Fatal("not released at its deadline")
			}
			if took := time.Since(start); took < hold {
				t.Fatalf("released after %v, before its deadline %v", took, hold)
			}
			if c.domain {
				if d := m.domainState(t); d.Inflight != 0 || d.Gen == dom.Gen {
					t.Fatalf("domain %+v after release (before %+v)", d, dom)
				}
			} else if s := m.slotOf(t, "k"); s.Inflight != 0 || s.Gen < before.Gen+2 {
				t.Fatalf("slot %+v after release (before %+v)", s, before)
			}
			if s := m.stats(t); s.UDPHeld != 1 || s.UDPTimedOut != 1 || s.Completed != 0 {
				t.Fatalf("counters %+v", s)
			}
		})
	}
}

// With the table full, a write holds the whole domain for as long as it
// would have been held, then the domain is bumped: never forgotten.
func TestMemcachedUDPTableFull(t *testing.T) {
	m := newMcUDP(t)
	cl := newMcUDPClient(t)
	m.guarded(t, "other", "O", time.Time{})
	for i := range uint32(santaSantaMcLayoutSANTA_MC_UDP_WRITES) {
		k := santaSantaMcUdpKey{Domain: 1 << 30, Addr: [4]uint32{i}}
		if err := m.d.objs.McUdpWrites.Put(k, santaSantaMcUdpWrite{State: 3}); err != nil {
			t.Fatalf("filling entry %d: %v", i, err)
		}
	}
	before := m.slotOf(t, "k")
	m.write(t, cl, 5, "set k 0 0 1\r\nB\r\n")
	if _, ok := m.held(t, cl, 5); ok {
		t.Fatal("held one by one in a full table")
	}
	if s := m.slotOf(t, "k"); s != (santaSantaMcSlot{Gen: before.Gen + 2}) {
		t.Fatalf("slot %+v (before %+v): want bumped twice, not in flight", s, before)
	}
	if d := m.domainState(t); d.HoldUntil == 0 {
		t.Fatalf("domain %+v not held", d)
	}
	m.expectGet(t, "other", "") // another key: the domain is held
	if s := m.stats(t); s.UDPDomain != 1 || s.GuardInFlight == 0 {
		t.Fatalf("counters %+v", s)
	}
	m.settled(t, 5*time.Second)
	m.expectGet(t, "other", "") // built before the hold ended: the domain was bumped
	m.guarded(t, "again", "G", time.Time{})
	m.expectGet(t, "again", "G")
}

// Two writes of one client with one request id: a reply with it may be
// either's, so the second holds the whole domain until its deadline.
func TestMemcachedUDPDuplicateID(t *testing.T) {
	m := newMcUDP(t)
	cl := newMcUDPClient(t)
	m.write(t, cl, 9, "set a 0 0 1\r\nB\r\n")
	m.write(t, cl, 9, "set b 0 0 1\r\nB\r\n")
	if w, ok := m.held(t, cl, 9); !ok || w.Slot != mcSlot([]byte("a"), m.svc) {
		t.Fatalf("held %v %+v: want the first write", ok, w)
	}
	m.reply(t, cl, mcReplyFrame(9, 0, 1, "STORED\r\n")) // the first's or the second's
	g, err := m.d.Generation(m.svc, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if !g.InFlight {
		t.Fatal("a reply that may be the second write's let the domain go")
	}
	m.guarded(t, "b", "old", time.Time{})
	m.expectGet(t, "b", "")
	m.settled(t, 5*time.Second)
	m.expectGet(t, "b", "")
	if s := m.stats(t); s.UDPHeld != 1 || s.UDPDomain != 1 || s.Completed != 1 {
		t.Fatalf("counters %+v", s)
	}
}

// A delayed flush_all over UDP holds the domain until its write is
// released (its deadline: OK is also a read's reply) and then for its
// delay and memcached's clock slack; the domain is bumped then.
func TestMemcachedUDPDelayedFlush(t *testing.T) {
	const hold = udpHold
	const slack = time.Duration(santaSantaMcLayoutSANTA_MC_CLOCK_SLACK_MS) * time.Millisecond
	m := newMcUDP(t)
	cl := newMcUDPClient(t)
	start := time.Now()
	m.write(t, cl, 4, "flush_all 1\r\n")
	if w, ok := m.held(t, cl, 4); !ok || w.Delay != 1 || w.Slot != uint32(santaSantaMcLayoutSANTA_MC_NO_SLOT) {
		t.Fatalf("held %v %+v: want domain-wide with a delay of 1", ok, w)
	}
	m.guarded(t, "k", "old", time.Time{})
	if !eventually(hold+2*time.Second, 5*time.Millisecond, func() bool { _, ok := m.held(t, cl, 4); return !ok }) {
		t.Fatal("not released at its deadline")
	}
	if d := m.domainState(t); d.HoldUntil == 0 || d.Inflight != 0 {
		t.Fatalf("domain %+v: want held for the delay", d)
	}
	m.settled(t, 5*time.Second)
	if took, least := time.Since(start), hold+time.Second+slack; took < least {
		t.Fatalf("the domain was let go after %v, before %v", took, least)
	}
	m.expectGet(t, "k", "")
	if s := m.stats(t); s.DelayedFlush != 1 {
		t.Fatalf("counters %+v", s)
	}
}

// A delay above 30 days is a unix time to memcached, and one of 9 digits
// is before it started: no flush, nothing held after the write's release.
func TestMemcachedUDPFlushUnixTime(t *testing.T) {
	m := newMcUDP(t)
	cl := newMcUDPClient(t)
	m.write(t, cl, 4, "flush_all 2592001\r\n")
	if !eventually(udpHold+2*time.Second, 5*time.Millisecond, func() bool { _, ok := m.held(t, cl, 4); return !ok }) {
		t.Fatal("not released at its deadline")
	}
	if d := m.domainState(t); d.HoldUntil != 0 || d.Inflight != 0 {
		t.Fatalf("domain %+v: want neither held nor in flight", d)
	}
	if s := m.stats(t); s.DelayedFlush != 0 {
		t.Fatalf("counters %+v", s)
	}
}
