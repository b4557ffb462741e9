package datapath

// Answering after a set (mc_fresh.h; docs/memcached.md): a set over TCP
// that memcached stored, with nothing else writing its key meanwhile, lets
// the key's rule answer with the set's value, byte for byte what memcached
// itself answers. With Debian's memcached in a network namespace.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/rule"
)

// getAsMemcached runs memcached's UDP GET of key through XDP: the kernel
// must answer with the frame memcached's own reply makes, asked over a
// socket (XDP runs only in test runs here, so memcached answers it).
func (m *mcTCP) getAsMemcached(t *testing.T, key string) {
	t.Helper()
	payload := mcFrame(0x1234, "get "+key+"\r\n")
	req := request(netip.MustParseAddrPort(m.addr), payload)
	verdict, out := run(t, m.d.XDPProgram(), req.Bytes())
	if verdict != xdpTX {
		t.Fatalf("get %s passed (verdict %d): the set's value should answer", key, verdict)
	}
	want := req.Reply(m.askUDP(t, payload)).Bytes()
	if !bytes.Equal(out, want) {
		t.Fatalf("get %s: the kernel's frame\n%q\nmemcached's\n%q", key, out, want)
	}
}

// askUDP is memcached's own reply to a datagram.
func (m *mcTCP) askUDP(t *testing.T, payload []byte) []byte {
	t.Helper()
	c, err := net.Dial("udp", m.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// guardNow installs a GET rule for key with value, guarded at its
// generation now.
func (m *mcTCP) guardNow(t *testing.T, key, value string) {
	t.Helper()
	m.guard(t, key, value, m.generation(t, key))
	m.get(t, key, value)
}

// A stored set's value answers, whatever its length, flags (memcached
// prints them in plain decimal) and exptime; each set replaces the last.
func TestMemcachedSetAnswers(t *testing.T) {
	m := newMcTCP(t)
	c := m.client(t)
	m.guardNow(t, "k", "A")
	for i, set := range []string{
		"set k 0 0 5\r\nFRESH\r\n",
		"set k 007 0 2\r\nB2\r\n",
		"set k 4294967 100 0\r\n\r\n",
		"set k 0 0 03\r\nabc\r\n",
		"set k 1 0 64\r\n" + strings.Repeat("v", 64) + "\r\n",
		"set k 0 0 10\r\nA\r\nEND\r\nBC\r\n", // data that reads as a reply's end
	} {
		c.send(t, set)
		c.expect(t, "STORED")
		m.getAsMemcached(t, "k")
		if g := m.generation(t, "k"); !g.Fresh || g.InFlight {
			t.Fatalf("after %q: generation %+v, want fresh", set, g)
		}
		if s := m.stats(t); s.Refreshed != uint64(i+1) {
			t.Fatalf("after %q: %d refreshed, want %d", set, s.Refreshed, i+1)
		}
	}
	// The longest text a set may give.
	m.guardNow(t, longKey, "A")
	c.send(t, "set "+longKey+" 0 0 1\r\nB\r\n")
	c.expect(t, "STORED")
	m.getAsMemcached(t, longKey)
	// A rule of another key keeps its own value, and is not fresh.
	m.guardNow(t, "other", "O")
	c.send(t, "set k 0 0 1\r\nZ\r\n")
	c.expect(t, "STORED")
	m.get(t, "other", "O")
	if g := m.generation(t, "other"); g.Fresh {
		t.Fatalf("another key's generation %+v: fresh", g)
	}
	m.getAsMemcached(t, "k")
}

// Sets of random keys (any printable byte), flags (leading zeros too),
// exptimes and data (any byte: CR, LF, NUL, "END") each answer exactly
// what memcached itself answers a get of their key.
func TestMemcachedSetsRandom(t *testing.T) {
	m := newMcTCP(t)
	c := m.client(t)
	rng := rand.New(rand.NewPCG(23, 5))
	for i := range 60 {
		key := make([]byte, 1+rng.IntN(60))
		for j := range key {
			key[j] = byte(0x21 + rng.IntN(0x7f-0x21))
		}
		data := make([]byte, rng.IntN(100))
		for j := range data {
			data[j] = []byte{0, '\r', '\n', 'E', 'N', 'D', ' ', 0xff, 'x'}[rng.IntN(9)]
		}
		// At most 9 digits, zero-padded to a width of up to 9.
		flags := fmt.Sprintf("%0*d", rng.IntN(10), rng.IntN([]int{10, 1000, 1_000_000_000}[rng.IntN(3)]))
		exptime := []string{"0", "3", "600", "2592000"}[rng.IntN(4)]
		m.guardNow(t, string(key), "A")
		c.send(t, fmt.Sprintf("set %s %s %s %d\r\n%s\r\n", key, flags, exptime, len(data), data))
		c.expect(t, "STORED")
		m.getAsMemcached(t, string(key))
		if s := m.stats(t); s.Refreshed != uint64(i+1) {
			t.Fatalf("set %d (key %q): %d refreshed, want %d", i, key, s.Refreshed, i+1)
		}
	}
}

// Pipelined sets of several keys in one segment are each taken.
func TestMemcachedSetsPipelined(t *testing.T) {
	m := newMcTCP(t)
	c := m.client(t)
	var segment strings.Builder
	for i := range 5 {
		key := fmt.Sprintf("p%d", i)
		m.guardNow(t, key, "A")
		fmt.Fprintf(&segment, "set %s 0 0 2\r\nX%d\r\n", key, i)
	}
	c.send(t, segment.String())
	for range 5 {
		c.expect(t, "STORED")
	}
	for i := range 5 {
		m.getAsMemcached(t, fmt.Sprintf("p%d", i))
	}
}

// longKey is a key whose get's text, with a value of 10 bytes, is longer
// than a set may give (SANTA_MC_FRESH_LEN), and with 1 byte fits.
var longKey = strings.Repeat("L", 230)

// Writes whose result the kernel cannot know from the write alone, or
// that it cannot tie to their reply, leave the rule dead: memcached
// answers.
func TestMemcachedSetNotTaken(t *testing.T) {
	m := newMcTCP(t)
	for _, tc := range []struct {
		name, key string
		writes    []string // segments
		reply     []string // memcached's lines, in order
	}{
		{"noreply", "k0", []string{"set k0 0 0 1 noreply\r\nB\r\nget nothing\r\n"}, []string{"END"}},
		{"add", "k1", []string{"add k1 0 0 1\r\nB\r\n"}, []string{"NOT_STORED"}},
		{"replace", "k2", []string{"replace k2 0 0 1\r\nB\r\n"}, []string{"STORED"}},
		{"append", "k3", []string{"append k3 0 0 1\r\nB\r\n"}, []string{"STORED"}},
		{"cas", "k4", []string{"cas k4 0 0 1 1\r\nB\r\n"}, []string{"EXISTS"}},
		{"expired at once", "k5", []string{"set k5 0 -1 1\r\nB\r\n"}, []string{"STORED"}},
		{"expires within a second", "k6", []string{"set k6 0 1 1\r\nB\r\n"}, []string{"STORED"}},
		{"may expire at once (memcached's clock lags up to 2 s)", "k12", []string{"set k12 0 2 1\r\nB\r\n"}, []string{"STORED"}},
		{"unix time", "k7", []string{"set k7 0 2592001 1\r\nB\r\n"}, []string{"STORED"}},
		{"value too long", "k8", []string{"set k8 0 0 300\r\n" + strings.Repeat("v", 300) + "\r\n"}, []string{"STORED"}},
		{"text too long", longKey, []string{"set " + longKey + " 0 0 10\r\n0123456789\r\n"}, []string{"STORED"}},
		{"cut across segments", "k9", []string{"set k9 0 0 5\r\nFR", "ESH\r\n"}, []string{"STORED"}},
		{"after a meta command with q", "k10", []string{"mn\r\nmg nothing v q\r\nset k10 0 0 1\r\nB\r\n"}, []string{"MN", "STORED"}},
		// Last: the connection's stream is lost after it.
		{"bad data chunk", "k11", []string{"set k11 0 0 1\r\nBB\r\n"}, []string{"CLIENT_ERROR bad data chunk"}},
	} {
		// Not subtests: the test's thread is the one in memcached's
		// network namespace.
		func() {
			key := tc.key
			c := m.client(t)
			c.send(t, "set "+key+" 0 0 1\r\nA\r\n")
			c.expect(t, "STORED")
			m.guardNow(t, key, "A")
			for _, w := range tc.writes {
				c.send(t, w)
				time.Sleep(10 * time.Millisecond) // one segment each
			}
			for _, line := range tc.reply {
				c.expect(t, line)
			}
			if answered, _ := m.answered(t, key); answered {
				t.Errorf("%s: the kernel answered", tc.name)
			}
			if g := m.generation(t, key); g.Fresh {
				t.Errorf("%s: generation %+v, fresh", tc.name, g)
			}
		}()
	}
}

// answered runs memcached's UDP GET of key through XDP: whether the kernel
// answered, and the frame out.
func (m *mcTCP) answered(t *testing.T, key string) (bool, []byte) {
	t.Helper()
	frame := request(netip.MustParseAddrPort(m.addr), mcFrame(0x1234, "get "+key+"\r\n")).Bytes()
	verdict, out := run(t, m.d.XDPProgram(), frame)
	return verdict == xdpTX, out
}

// Two sets of one key in flight at once, on two connections: memcached
// may apply them in either order, so neither's value answers.
func TestMemcachedSetsRacing(t *testing.T) {
	m := newMcTCP(t)
	m.raceSets(t)
	if s := m.stats(t); s.Refreshed != 0 {
		t.Fatalf("%d refreshed, want 0", s.Refreshed)
	}
}

// raceSets guards a rule of k, then has two sets of k (values B and C)
// in flight at once on two connections, memcached stopped, until both
// are stored: the rule does not answer.
func (m *mcTCP) raceSets(t *testing.T) {
	t.Helper()
	a, b := m.client(t), m.client(t)
	m.guardNow(t, "k", "A")
	m.stop(t)
	a.send(t, "set k 0 0 1\r\nB\r\n")
	b.send(t, "set k 0 0 1\r\nC\r\n")
	if err := m.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	a.expect(t, "STORED")
	b.expect(t, "STORED")
	m.get(t, "k", "")
}

// answeringSet starts memcached with a rule of k, and sends set of k,
// whose value then answers.
func answeringSet(t *testing.T, set string) *mcTCP {
	t.Helper()
	m := newMcTCP(t)
	c := m.client(t)
	m.guardNow(t, "k", "A")
	c.send(t, set)
	c.expect(t, "STORED")
	m.getAsMemcached(t, "k")
	return m
}

// A set's value answers until the set's exptime, less what memcached's
// clock may lag (SANTA_MC_CLOCK_LAG_MS), then never.
func TestMemcachedSetExpires(t *testing.T) {
	m := answeringSet(t, "set k 0 3 1\r\nB\r\n")
	time.Sleep(time.Duration(3000-santaSantaMcLayoutSANTA_MC_CLOCK_LAG_MS+100) * time.Millisecond)
	m.get(t, "k", "")
	if g := m.generation(t, "k"); g.Fresh {
		t.Fatalf("generation %+v past the set's deadline: fresh", g)
	}
}

// A record being written (its seq odd) is not read.
func TestMemcachedSetBeingWritten(t *testing.T) {
	m := answeringSet(t, "set k 0 0 1\r\nB\r\n")
	at := mcSlot([]byte("k"), m.tcp) & (uint32(santaSantaMcLayoutSANTA_MC_FRESH) - 1)
	var rec santaSantaMcFresh
	if err := m.d.objs.McFresh.Lookup(at, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Seq |= 1
	if err := m.d.objs.McFresh.Put(at, &rec); err != nil {
		t.Fatal(err)
	}
	m.get(t, "k", "")
	rec.Seq++
	if err := m.d.objs.McFresh.Put(at, &rec); err != nil {
		t.Fatal(err)
	}
	m.getAsMemcached(t, "k")
}

func TestFreshShape(t *testing.T) {
	key := []byte("k")
	good := mcGetRule("k", "AB")
	c, err := rule.Compile(good)
	if err != nil {
		t.Fatal(err)
	}
	if !freshShape(good, c, key) {
		t.Fatal("memcached's get of k is not taken")
	}
	prefix := good
	prefix.Condition.MaxLen = 0
	copyPast := good
	copyPast.Processors = append(slices.Clone(good.Processors), rule.Copy(2, 2, 10))
	getK := mcFrame(0, "get k\r\n")
	for _, tc := range []struct {
		name string
		r    rule.Rule
		key  []byte
	}{
		{"another key", good, []byte("j")},
		{"no key", good, nil},
		{"gets", mcReply(mcFrame(0, "gets k\r\n"), "VALUE k 0 2\r\nAB\r\nEND\r\n"), key},
		{"two keys", mcReply(mcFrame(0, "get k j\r\n"), "VALUE k 0 2\r\nAB\r\nEND\r\n"), key},
		{"a cas", mcReply(getK, "VALUE k 0 2 7\r\nAB\r\nEND\r\n"), key},
		{"leading zero", mcReply(getK, "VALUE k 01 2\r\nAB\r\nEND\r\n"), key},
		{"short data", mcReply(getK, "VALUE k 0 3\r\nAB\r\nEND\r\n"), key},
		{"no END", mcReply(getK, "VALUE k 0 2\r\nAB\r\n"), key},
		{"a miss", mcReply(getK, "END\r\n"), key},
		{"prefix", prefix, key},
		{"another frame", mcGetOtherFrame(getK, []byte{0, 0, 0, 2, 0, 0}), key},
		{"copy past frame", copyPast, key},
	} {
		c, err := rule.Compile(tc.r)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if freshShape(tc.r, c, tc.key) {
			t.Errorf("%s: taken", tc.name)
		}
	}
}

// mcReply is a rule answering the datagram req exactly with text after
// memcached's frame header, the request id copied.
func mcReply(req []byte, text string) rule.Rule {
	reply := mcFrame(0, text)
	return rule.Rule{
		Condition:  rule.ExactLength(rule.Condition{Offset: 2, Pattern: req[2:]}, uint16(len(req))),
		Processors: []rule.Processor{rule.Put(0, reply), rule.Copy(0, 2, 0)},
		ReplyLen:   uint16(len(reply)),
	}
}

// mcGetOtherFrame is mcReply of a value with frame bytes 2 to 7 set to frame.
func mcGetOtherFrame(req, frame []byte) rule.Rule {
	r := mcReply(req, "VALUE k 0 2\r\nAB\r\nEND\r\n")
	r.Processors = append(r.Processors, rule.Put(2, frame))
	return r
}
