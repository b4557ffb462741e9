package datapath

// Refilled from a get's reply (mc_fill.h; docs/memcached.md): a rule whose
// key was written answers again with memcached's own reply to a get of the
// key that passed, if nothing wrote the key's slot between the get's
// arrival and its reply and no write may have given the key an expiry.
// Gets run through XDP (BPF_PROG_TEST_RUN), then are sent for real from
// the same client and request id, so that memcached's reply passes the
// cgroup egress hook.

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/pkttest"
)

// passGet runs the client's "get <key>" with request id through XDP: it
// must pass.
func (m *mcTCP) passGet(t *testing.T, from *mcUDPClient, id uint16, key string) {
	t.Helper()
	m.passDatagram(t, from, id, "get "+key+"\r\n")
}

// passDatagram runs the client's datagram (payload after the frame
// header, request id id) through XDP: it must pass.
func (m *mcTCP) passDatagram(t *testing.T, from *mcUDPClient, id uint16, payload string) {
	t.Helper()
	frame := pkttest.UDPFrame{SrcMAC: clientMAC, DstMAC: serverMAC, Src: from.addr, Dst: netip.MustParseAddrPort(m.addr),
		Payload: mcFrame(id, payload), TTL: 64, IPID: 1}
	if verdict, out := run(t, m.d.XDPProgram(), frame.Bytes()); verdict != xdpPass {
		t.Fatalf("%q answered by the kernel (%q): it should pass", payload, out)
	}
}

// sendGet sends the client's "get <key>" with request id to memcached for
// real and returns memcached's reply.
func (m *mcTCP) sendGet(t *testing.T, from *mcUDPClient, id uint16, key string) []byte {
	t.Helper()
	if _, err := from.c.WriteToUDPAddrPort(mcFrame(id, "get "+key+"\r\n"), netip.MustParseAddrPort(m.addr)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	from.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := from.c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// refill passes the client's get of key through XDP, then sends it.
func (m *mcTCP) refill(t *testing.T, from *mcUDPClient, id uint16, key, want string) {
	t.Helper()
	m.passGet(t, from, id, key)
	if got := m.sendGet(t, from, id, key); !bytes.Equal(got, mcReplyFrame(id, 0, 1, want)) {
		t.Fatalf("memcached answered %q, want %q", got, want)
	}
}

// After a write the kernel could not take the value of (an append), the
// next get's reply refills the rule: from then the kernel answers exactly
// what memcached does, until the next write.
func TestMemcachedGetRefills(t *testing.T) {
	m := newMcTCP(t)
	c := m.client(t)
	cl := newMcUDPClient(t)
	c.send(t, "set k 0 0 1\r\nA\r\n")
	c.expect(t, "STORED")
	m.guardNow(t, "k", "A")
	c.send(t, "append k 0 0 1\r\nB\r\n")
	c.expect(t, "STORED")
	m.get(t, "k", "")
	m.refill(t, cl, 7, "k", "VALUE k 0 2\r\nAB\r\nEND\r\n")
	m.getAsMemcached(t, "k")
	if s := m.stats(t); s.Filled != 1 {
		t.Fatalf("%d filled, want 1", s.Filled)
	}
	// The next write ends it; the next get's reply refills it again.
	c.send(t, "append k 0 0 1\r\nC\r\n")
	c.expect(t, "STORED")
	m.get(t, "k", "")
	m.refill(t, cl, 8, "k", "VALUE k 0 3\r\nABC\r\nEND\r\n")
	m.getAsMemcached(t, "k")
	// A rule of another key of the domain keeps its own value.
	m.guardNow(t, "other", "O")
	m.get(t, "other", "O")
}

// Replies of other shapes refill as memcached prints them (mc_fill.h
// parses the reply): a key of 200 bytes, flags of nine digits (the most it
// takes), a value of twelve bytes.
func TestMemcachedGetRefillShapes(t *testing.T) {
	m := newMcTCP(t)
	c := m.client(t)
	cl := newMcUDPClient(t)
	for i, tc := range []struct{ key, flags string }{
		{strings.Repeat("k", 200), "0"},
		{"f9", "123456789"},
	} {
		c.send(t, "set "+tc.key+" 0 0 1\r\nA\r\n")
		c.expect(t, "STORED")
		m.guardNow(t, tc.key, "A")
		c.send(t, "set "+tc.key+" "+tc.flags+" 0 1\r\nA\r\n")
		c.expect(t, "STORED")
		c.send(t, "append "+tc.key+" 0 0 11\r\n0123456789B\r\n")
		c.expect(t, "STORED")
		m.get(t, tc.key, "")
		m.refill(t, cl, uint16(20+i), tc.key, "VALUE "+tc.key+" "+tc.flags+" 12\r\nA0123456789B\r\nEND\r\n")
		m.getAsMemcached(t, tc.key)
	}
	if s := m.stats(t); s.Filled != 2 {
		t.Fatalf("%d filled, want 2", s.Filled)
	}
}

// The reply's parse (mc_fill.h) refills only from one value of the get's
// key, framed as memcached frames it. A test socket as memcached's UDP
// service sends each reply below to a get that may refill (its key's rule
// killed by a set over UDP and its STORED): the well-formed one refills,
// which shows the others reach the parse; every other leaves the rule
// dead.
func TestMemcachedRefillParseRefuses(t *testing.T) {
	m := newMcUDP(t)
	cl := newMcUDPClient(t)
	for i, tc := range []struct {
		name, reply string
		fills       bool
	}{
		{"well formed", "VALUE k 0 2\r\nAB\r\nEND\r\n", true},
		{"flags of nine digits", "VALUE k 123456789 2\r\nAB\r\nEND\r\n", true},
		{"no key", "VALUE  0 2\r\nAB\r\nEND\r\n", false},
		{"another key", "VALUE j 0 2\r\nAB\r\nEND\r\n", false},
		{"the key and more", "VALUE kk 0 2\r\nAB\r\nEND\r\n", false},
		{"flags of ten digits", "VALUE k 1234567890 2\r\nAB\r\nEND\r\n", false},
		{"no flags", "VALUE k  2\r\nAB\r\nEND\r\n", false},
		{"a sign", "VALUE k -1 2\r\nAB\r\nEND\r\n", false},
		{"no length", "VALUE k 0 \r\nAB\r\nEND\r\n", false},
		{"a longer length", "VALUE k 0 3\r\nAB\r\nEND\r\n", false},
		{"a shorter length", "VALUE k 0 1\r\nAB\r\nEND\r\n", false},
		{"CR without LF", "VALUE k 0 2\rXAB\r\nEND\r\n", false},
		{"another end", "VALUE k 0 2\r\nAB\r\nENX\r\n", false},
		{"two values", "VALUE k 0 2\r\nAB\r\nVALUE k 0 2\r\nAB\r\nEND\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("k%d", i) // the reply's k
			m.guarded(t, key, "A", time.Time{})
			m.write(t, cl, 1, "set "+key+" 0 0 2\r\nAB\r\n")
			m.reply(t, cl, mcReplyFrame(1, 0, 1, "STORED\r\n"))
			m.expectGet(t, key, "")
			reply := strings.ReplaceAll(tc.reply, "k", key)
			m.write(t, cl, 2, "get "+key+"\r\n")
			m.reply(t, cl, mcReplyFrame(2, 0, 1, reply))
			answered, out := m.send(t, mcFrame(0x1234, "get "+key+"\r\n"))
			if want := mcFrame(0x1234, reply); tc.fills && !bytes.Equal(out, want) {
				t.Fatalf("the kernel answered %v %q, want %q", answered, out, want)
			}
			if !tc.fills && answered {
				t.Fatalf("the kernel answered %q", out)
			}
		})
	}
}

// Two sets of one key in flight at once (TestMemcachedSetsRacing): neither
// value answers, memcached's reply to the next get does.
func TestMemcachedGetRefillsAfterRacingSets(t *testing.T) {
	m := newMcTCP(t)
	cl := newMcUDPClient(t)
	m.raceSets(t)
	m.passGet(t, cl, 9, "k")
	got := m.sendGet(t, cl, 9, "k")
	if !bytes.Equal(got, mcReplyFrame(9, 0, 1, "VALUE k 0 1\r\nB\r\nEND\r\n")) &&
		!bytes.Equal(got, mcReplyFrame(9, 0, 1, "VALUE k 0 1\r\nC\r\nEND\r\n")) {
		t.Fatalf("memcached answered %q", got)
	}
	m.getAsMemcached(t, "k")
}

// What must not refill: a write between the get's arrival and its reply,
// two gets of one client and request id waiting at once, a get whose id
// an unanswered datagram of its client claims, a reply of another key, a
// key that a write may have given an expiry (touch, a set's exptime, a
// meta write), a rule with a deadline, a reply to another client or
// request id, a miss.
func TestMemcachedGetRefillRefused(t *testing.T) {
	m := newMcTCP(t)
	c := m.client(t)
	cl, other := newMcUDPClient(t), newMcUDPClient(t)
	// dead sets key to value, guards a rule of it, and kills the rule with
	// an append the kernel cannot take.
	dead := func(key string) {
		t.Helper()
		c.send(t, "set "+key+" 0 0 1\r\nA\r\n")
		c.expect(t, "STORED")
		m.guardNow(t, key, "A")
		c.send(t, "append "+key+" 0 0 1\r\nB\r\n")
		c.expect(t, "STORED")
		m.get(t, key, "")
	}
	want := func(key string) string { return "VALUE " + key + " 0 2\r\nAB\r\nEND\r\n" }

	// A write between: its reply finds the slot moved on.
	dead("w")
	m.passGet(t, cl, 1, "w")
	c.send(t, "append w 0 0 0\r\n\r\n")
	c.expect(t, "STORED")
	m.sendGet(t, cl, 1, "w")
	m.get(t, "w", "")

	// Two gets with one id waiting: neither refills.
	dead("d")
	m.passGet(t, cl, 2, "d")
	m.passGet(t, cl, 2, "d")
	m.sendGet(t, cl, 2, "d")
	m.sendGet(t, cl, 2, "d")
	m.get(t, "d", "")

	// Another client, another id: not the get that waited.
	dead("o")
	m.passGet(t, cl, 3, "o")
	m.sendGet(t, other, 3, "o")
	m.sendGet(t, cl, 4, "o")
	m.get(t, "o", "")
	// The get that waited still refills.
	if got := m.sendGet(t, cl, 3, "o"); !bytes.Equal(got, mcReplyFrame(3, 0, 1, want("o"))) {
		t.Fatalf("memcached answered %q", got)
	}
	m.getAsMemcached(t, "o")

	// A datagram of the client with the id, not a get that may fill, has
	// not been answered yet: the get that finds its id claimed fills
	// nothing, whichever reply comes first.
	dead("c")
	m.passDatagram(t, cl, 9, "get  c\r\n") // two spaces: no rule matches
	m.passGet(t, cl, 9, "c")
	m.sendGet(t, cl, 9, "c")
	m.get(t, "c", "")

	// A reply of another key with the get's id: not its key.
	dead("r")
	m.passGet(t, cl, 10, "r")
	if got := m.sendGet(t, cl, 10, "o"); !bytes.Equal(got, mcReplyFrame(10, 0, 1, want("o"))) {
		t.Fatalf("memcached answered %q", got)
	}
	m.sendGet(t, cl, 10, "r")
	m.get(t, "r", "")

	// Writes that may give the key an expiry.
	for _, tc := range []struct{ key, write, reply string }{
		{"t", "touch t 0\r\n", "TOUCHED"},
		{"s", "set s 0 100 2\r\nAB\r\n", "STORED"},
		{"m", "ms m 2 T0\r\nAB\r\n", "HD"},
	} {
		dead(tc.key)
		c.send(t, tc.write)
		c.expect(t, tc.reply)
		// A value the kernel took from the set answers on its own
		// (mc_fresh.h); kill it to see what a get's reply does.
		c.send(t, "append "+tc.key+" 0 0 0\r\n\r\n")
		c.expect(t, "STORED")
		m.refill(t, cl, 5, tc.key, want(tc.key))
		m.get(t, tc.key, "")
	}

	// A rule with a deadline: the reply does not tell the item's.
	c.send(t, "set e 0 0 1\r\nA\r\n")
	c.expect(t, "STORED")
	m.guarded(t, "e", "A", time.Now().Add(time.Hour))
	m.get(t, "e", "A")
	c.send(t, "append e 0 0 1\r\nB\r\n")
	c.expect(t, "STORED")
	m.refill(t, cl, 6, "e", want("e"))
	m.get(t, "e", "")

	// A miss: nothing to answer with.
	dead("gone")
	c.send(t, "delete gone\r\n")
	c.expect(t, "DELETED")
	m.refill(t, cl, 7, "gone", "END\r\n")
	m.get(t, "gone", "")

	if s := m.stats(t); s.Filled != 1 {
		t.Fatalf("%d filled, want 1", s.Filled)
	}
}

// A storage command is in flight from its line's end, before its data is
// in: memcached may act on the line alone (a value too large unlinks its
// key at once), so no get's reply refills meanwhile. A connection that
// ends with its data still to come releases it, bumped.
func TestMemcachedLineInFlight(t *testing.T) {
	m := newMcTCP(t)
	c := m.client(t)
	c.send(t, "set k 0 0 1\r\nA\r\n")
	c.expect(t, "STORED")
	m.guardNow(t, "k", "A")
	c.send(t, "set k 0 0 5\r\nAB")
	if !eventually(time.Second, time.Millisecond, func() bool { return m.generation(t, "k").InFlight }) {
		t.Fatal("a set whose data is still to come is not in flight")
	}
	m.get(t, "k", "")
	c.send(t, "CDE\r\n")
	c.expect(t, "STORED")
	if g := m.generation(t, "k"); g.InFlight {
		t.Fatalf("after STORED: %+v", g)
	}
	m.get(t, "k", "") // a set cut across segments is not taken

	d := m.client(t)
	before := m.generation(t, "k")
	d.send(t, "set k 0 0 5\r\nAB")
	if !eventually(time.Second, time.Millisecond, func() bool { return m.generation(t, "k").InFlight }) {
		t.Fatal("a set whose data is still to come is not in flight")
	}
	d.c.Close()
	if !eventually(2*time.Second, time.Millisecond, func() bool { return !m.generation(t, "k").InFlight }) {
		t.Fatal("the closed connection's set is still in flight")
	}
	if g := m.generation(t, "k"); g.Gen < before.Gen+2 {
		t.Fatalf("after the close: %+v, before %+v: want bumped at the line and at the close", g, before)
	}
	m.get(t, "k", "")
}
