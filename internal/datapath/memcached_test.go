package datapath

// memcached invalidation through BPF_PROG_TEST_RUN: UDP requests of a
// memcached service through XDP (docs/memcached.md, "Invalidation").

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// mcFrame is memcached's UDP frame header (request id, sequence 0, one
// datagram) before cmd.
func mcFrame(id uint16, cmd string) []byte {
	return append([]byte{byte(id >> 8), byte(id), 0, 0, 0, 1, 0, 0}, cmd...)
}

// mcGetRule answers exactly "get <key>\r\n" over UDP with value, the
// request id copied.
func mcGetRule(key, value string) rule.Rule {
	req := mcFrame(0, "get "+key+"\r\n")
	reply := mcFrame(0, fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(value), value))
	return rule.Rule{
		Condition:  rule.ExactLength(rule.Condition{Offset: 2, Pattern: req[2:]}, uint16(len(req))),
		Processors: []rule.Processor{rule.Put(0, reply), rule.Copy(0, 2, 0)},
		ReplyLen:   uint16(len(reply)),
	}
}

// mcUDP is a memcached UDP service of its own domain in XDP test runs.
type mcUDP struct {
	d   *Datapath
	c   *net.UDPConn
	svc model.ServiceID
}

func newMcUDP(t testing.TB) *mcUDP { return newMcUDPOn(t, "127.0.0.1:0") }

// newMcUDPOn is newMcUDP with its socket bound to addr.
func newMcUDPOn(t testing.TB, addr string) *mcUDP {
	t.Helper()
	m := &mcUDP{d: openTest(t), c: boundUDP(t, addr)}
	m.svc = register(t, m.d, m.c)
	if err := m.d.SetParser(m.svc, model.Parser{Kind: model.ParserMemcached, Domain: m.svc}); err != nil {
		t.Fatal(err)
	}
	return m
}

// guarded installs a GET rule for key guarded at its generation now.
func (m *mcUDP) guarded(t testing.TB, key, value string, expires time.Time) model.RuleID {
	t.Helper()
	g, err := m.d.Generation(m.svc, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return m.add(t, mcGetRule(key, value), &model.Guard{Key: []byte(key), At: g, Expires: expires})
}

func (m *mcUDP) add(t testing.TB, r rule.Rule, g *model.Guard) model.RuleID {
	t.Helper()
	b := model.Batch{Add: []rule.Rule{r}, AddGuards: []*model.Guard{g}}
	if err := m.d.compile(m.svc, &b); err != nil {
		t.Fatal(err)
	}
	ids, err := m.d.Apply(m.svc, b)
	if err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

// send runs one datagram through XDP: whether it was answered, and the
// reply's payload.
func (m *mcUDP) send(t *testing.T, payload []byte) (bool, []byte) {
	t.Helper()
	verdict, out := run(t, m.d.XDPProgram(), request(local(m.c), payload).Bytes())
	if verdict != xdpTX {
		return false, nil
	}
	return true, out[14+20+8:]
}

// expectGet sends a GET of key: answered with value by the kernel, or
// passed if value is "".
func (m *mcUDP) expectGet(t *testing.T, key, value string) {
	t.Helper()
	answered, reply := m.send(t, mcFrame(0x1234, "get "+key+"\r\n"))
	switch {
	case value == "" && answered:
		t.Fatalf("get %s answered by the kernel (%q): a stale read", key, reply)
	case value != "" && !answered:
		t.Fatalf("get %s passed: the rule should answer", key)
	case value != "":
		want := mcFrame(0x1234, fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(value), value))
		if !bytes.Equal(reply, want) {
			t.Fatalf("get %s: %q, want %q", key, reply, want)
		}
	}
}

func (m *mcUDP) stats(t testing.TB) model.MemcachedStats {
	t.Helper()
	s, err := m.d.MemcachedStats(m.svc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every kind of write, arriving over UDP, kills the guarded rule of its
// key before XDP passes it to memcached; others' keys keep theirs.
func TestMemcachedUDPWritesInvalidate(t *testing.T) {
	writes := []string{
		"set k 0 0 1\r\nB\r\n", "add k 0 0 1 noreply\r\nB\r\n", "replace k 0 0 1\r\nB\r\n",
		"append k 0 0 1\r\nB\r\n", "prepend k 0 0 1\r\nB\r\n", "cas k 0 0 1 77\r\nB\r\n",
		"incr k 1\r\n", "decr k 1\r\n", "delete k\r\n", "touch k 10\r\n", "gat 10 k\r\n",
		"ms k 1 T0\r\nB\r\n", "md k q\r\n", "ma k\r\n", "mg k v T30\r\n",
		"get x\r\nset k 0 0 1\r\nB\r\n", // a write after a read, one datagram
	}
	for _, w := range writes {
		t.Run(w[:6], func(t *testing.T) {
			m := newMcUDP(t)
			m.guarded(t, "k", "A", time.Time{})
			m.guarded(t, "other", "O", time.Time{})
			m.expectGet(t, "k", "A")
			if answered, _ := m.send(t, mcFrame(1, w)); answered {
				t.Fatal("a write was answered")
			}
			m.expectGet(t, "k", "")
			m.expectGet(t, "other", "O")
			if s := m.stats(t); s.Writes != 1 || s.GuardStale == 0 {
				t.Fatalf("counters %+v: want 1 write and a stale guard", s)
			}
		})
	}
}

// Reads leave every rule answering.
func TestMemcachedUDPReadsKeepRules(t *testing.T) {
	m := newMcUDP(t)
	m.guarded(t, "k", "A", time.Time{})
	for _, r := range []string{"get k\r\n", "gets k other\r\n", "mg k v f t\r\n", "mn\r\n", "version\r\n", "stats\r\n"} {
		m.send(t, mcFrame(1, r))
	}
	m.expectGet(t, "k", "A")
	if s := m.stats(t); s.Writes != 0 || s.KeyBumps != 0 || s.DomainBumps != 0 {
		t.Fatalf("reads counted as writes: %+v", s)
	}
}

// flush_all, a base64 key, lost sync and a datagram that stops inside a
// command kill every rule of the domain; a rule built once nothing is in
// flight answers (a write of unknown keys over UDP is held domain-wide to
// its deadline, a delayed flush_all for its delay after).
func TestMemcachedUDPDomainWrites(t *testing.T) {
	for _, w := range []string{"flush_all\r\n", "flush_all 1 noreply\r\n", "ms aw== 1 b\r\nB\r\n",
		"bogus k\r\n", "set k 0 0 5\r\nAB", "\x80\x01\x00\x01"} {
		t.Run(fmt.Sprintf("%q", w), func(t *testing.T) {
			m := newMcUDP(t)
			m.guarded(t, "k", "A", time.Time{})
			m.guarded(t, "other", "O", time.Time{})
			m.send(t, mcFrame(1, w))
			m.expectGet(t, "k", "")
			m.expectGet(t, "other", "")
			m.settled(t, 5*time.Second)
			m.guarded(t, "again", "G", time.Time{})
			m.expectGet(t, "again", "G")
		})
	}
}

// settled waits until nothing of the domain is in flight or held.
func (m *mcUDP) settled(t *testing.T, within time.Duration) {
	t.Helper()
	if !eventually(within, 10*time.Millisecond, func() bool {
		g, err := m.d.Generation(m.svc, []byte("any"))
		return err == nil && !g.InFlight
	}) {
		t.Fatalf("the domain is still held after %v", within)
	}
}

// A guard of the domain alone dies with any write of it.
func TestMemcachedUDPDomainGuard(t *testing.T) {
	m := newMcUDP(t)
	g, err := m.d.Generation(m.svc, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	m.add(t, mcGetRule("k", "A"), &model.Guard{At: g})
	m.expectGet(t, "k", "A")
	m.send(t, mcFrame(1, "flush_all\r\n"))
	m.expectGet(t, "k", "")
}

// A rule past its deadline never answers; one before it does.
func TestMemcachedExpiry(t *testing.T) {
	m := newMcUDP(t)
	m.guarded(t, "soon", "S", time.Now().Add(200*time.Millisecond))
	m.guarded(t, "later", "L", time.Now().Add(time.Hour))
	m.guarded(t, "past", "P", time.Now().Add(-time.Second))
	m.expectGet(t, "soon", "S")
	m.expectGet(t, "past", "")
	time.Sleep(300 * time.Millisecond)
	m.expectGet(t, "soon", "")
	m.expectGet(t, "later", "L")
	if s := m.stats(t); s.GuardExpired != 2 {
		t.Fatalf("%d expired refusals counted, want 2", s.GuardExpired)
	}
}

// A generation read before a write is stale after it, and a guard of it
// never answers, even installed after the write.
func TestMemcachedGenerationReadBeforeWrite(t *testing.T) {
	m := newMcUDP(t)
	before, err := m.d.Generation(m.svc, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	m.send(t, mcFrame(1, "set k 0 0 1\r\nB\r\n"))
	after, err := m.d.Generation(m.svc, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	if after.Gen == before.Gen {
		t.Fatalf("generation %d did not move with a write", after.Gen)
	}
	m.add(t, mcGetRule("k", "A"), &model.Guard{Key: []byte("k"), At: before})
	m.expectGet(t, "k", "")
}

// Services of one memcached share a domain; a service that stops being
// parsed ends the domain's life, and guards of that life never answer
// again, even once it starts again.
func TestMemcachedDomains(t *testing.T) {
	m := newMcUDP(t)
	other := boundUDP(t, "127.0.0.1:0")
	member := register(t, m.d, other)
	if err := m.d.SetParser(member, model.Parser{Kind: model.ParserMemcached, Domain: 999}); err == nil {
		t.Fatal("joined a domain no service started")
	}
	if err := m.d.SetParser(member, model.Parser{Kind: model.ParserMemcached, Domain: m.svc}); err != nil {
		t.Fatal(err)
	}
	m.guarded(t, "k", "A", time.Time{})
	// A write through the member kills the rule of the leader.
	if verdict, _ := run(t, m.d.XDPProgram(), request(local(other), mcFrame(1, "delete k\r\n")).Bytes()); verdict != xdpPass {
		t.Fatalf("verdict %d", verdict)
	}
	m.expectGet(t, "k", "")

	id := m.guarded(t, "k2", "A", time.Time{})
	old, err := m.d.Generation(m.svc, []byte("k2"))
	if err != nil {
		t.Fatal(err)
	}
	m.expectGet(t, "k2", "A")
	if err := m.d.RemoveService(member); err != nil {
		t.Fatal(err)
	}
	m.expectGet(t, "k2", "")
	if g, _ := m.d.Generation(m.svc, []byte("k2")); g.Epoch != 0 {
		t.Fatalf("domain alive (life %d) after a service of it left", g.Epoch)
	}
	if err := m.d.SetParser(m.svc, model.Parser{Kind: model.ParserMemcached, Domain: m.svc}); err != nil {
		t.Fatal(err)
	}
	m.expectGet(t, "k2", "")
	replace := func(g model.Generation) error {
		b := model.Batch{Replace: []model.RuleUpdate{{ID: id, Rule: mcGetRule("k2", "A2")}},
			ReplaceGuards: []*model.Guard{{Key: []byte("k2"), At: g}}}
		if err := m.d.compile(m.svc, &b); err != nil {
			t.Fatal(err)
		}
		_, err := m.d.Apply(m.svc, b)
		return err
	}
	if err := replace(old); err == nil {
		t.Fatal("a guard of an earlier life was installed")
	}
	now, err := m.d.Generation(m.svc, []byte("k2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := replace(now); err != nil {
		t.Fatal(err)
	}
	m.expectGet(t, "k2", "A2")
}

// A domain's id goes to no other service while a service is still in
// the domain: given to another owner's service that starts a domain, the
// id would put the left-over member in it, its writes killing that
// owner's rules.
func TestMemcachedDomainIDNotReusedWhileJoined(t *testing.T) {
	d := openTestWith(t, Options{MaxRules: 1 << 10, MaxServices: 4})
	leader := register(t, d, boundUDP(t, "127.0.0.1:0"))
	if err := d.SetParser(leader, model.Parser{Kind: model.ParserMemcached, Domain: leader}); err != nil {
		t.Fatal(err)
	}
	memberConn := boundUDP(t, "127.0.0.1:0")
	member := register(t, d, memberConn)
	if err := d.SetParser(member, model.Parser{Kind: model.ParserMemcached, Domain: leader}); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveService(leader); err != nil {
		t.Fatal(err)
	}
	// The other two ids are handed out; the leader's is not.
	for range 2 {
		if id := register(t, d, boundUDP(t, "127.0.0.1:0")); id == leader {
			t.Fatalf("the ended leader's id %d given to a new service while %d is in its domain", id, member)
		}
	}
	if id, err := tryRegister(t, d, boundUDP(t, "127.0.0.1:0")); err == nil {
		t.Fatalf("service %d registered with all 4 ids taken or held", id)
	}
	// With the member gone, both ids are free.
	if err := d.RemoveService(member); err != nil {
		t.Fatal(err)
	}
	got := []model.ServiceID{register(t, d, boundUDP(t, "127.0.0.1:0")), register(t, d, boundUDP(t, "127.0.0.1:0"))}
	slices.Sort(got)
	if want := []model.ServiceID{min(leader, member), max(leader, member)}; !slices.Equal(got, want) {
		t.Fatalf("services %v registered; want the freed ids %v", got, want)
	}
}

// Bad guards are refused with the reason.
func TestMemcachedGuardRefused(t *testing.T) {
	m := newMcUDP(t)
	plain := boundUDP(t, "127.0.0.1:0")
	plainSvc := register(t, m.d, plain)
	g, err := m.d.Generation(m.svc, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.d.Generation(plainSvc, []byte("k")); !errors.Is(err, model.ErrNotMemcached) {
		t.Fatalf("generation of a plain service: %v", err)
	}
	if _, err := m.d.Generation(m.svc, []byte("a key")); err == nil {
		t.Fatal("a key with a space was read")
	}
	for name, c := range map[string]struct {
		svc model.ServiceID
		b   model.Batch
	}{
		"plain service": {plainSvc, model.Batch{Add: []rule.Rule{mcGetRule("k", "A")}, AddGuards: []*model.Guard{{Key: []byte("k"), At: g}}}},
		"bad key":       {m.svc, model.Batch{Add: []rule.Rule{mcGetRule("k", "A")}, AddGuards: []*model.Guard{{Key: make([]byte, 251), At: g}}}},
		"count":         {m.svc, model.Batch{Add: []rule.Rule{mcGetRule("k", "A")}, AddGuards: []*model.Guard{nil, nil}}},
	} {
		if err := m.d.compile(c.svc, &c.b); err != nil {
			t.Fatal(err)
		}
		if _, err := m.d.Apply(c.svc, c.b); err == nil {
			t.Errorf("%s: installed", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// What a memcached service adds per UDP request in XDP: a write passed
// (parsed, its key bumped) and a GET answered by a guarded rule (parsed,
// its guard read), each against the same request on a plain service (no
// parser, no guard). Each run is one frame (a repeated run would see the
// reply it wrote); the kernel's median duration is printed as a RESULT
// line. Nothing of speed is asserted.
func BenchmarkMemcachedUDP(b *testing.B) {
	mc := newMcUDP(b)
	plainConn := boundUDP(b, "127.0.0.1:0")
	plain := register(b, mc.d, plainConn)
	mc.guarded(b, "key:0001", "v", time.Time{})
	if _, err := mc.d.AddRule(plain, mcGetRule("key:0001", "v")); err != nil {
		b.Fatal(err)
	}
	set := mcFrame(1, "set key:0002 0 0 1\r\nB\r\n")
	get := mcFrame(1, "get key:0001\r\n")
	for _, c := range []struct {
		name    string
		to      *net.UDPConn
		payload []byte
		verdict uint32
	}{
		{"set_passed/plain", plainConn, set, xdpPass}, {"set_passed/memcached", mc.c, set, xdpPass},
		{"get_answered/plain", plainConn, get, xdpTX}, {"get_answered/memcached_guarded", mc.c, get, xdpTX},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := request(local(c.to), c.payload)
			frame := req.Bytes()
			// Each set is held as the first write of its request id: its
			// entry goes between runs, outside the time measured.
			held := mc.udpKey(req.Src, 1)
			ns := make([]int64, 0, b.N)
			for range b.N {
				ret, d, err := mc.d.XDPProgram().Benchmark(frame, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				if ret != c.verdict {
					b.Fatalf("verdict %d, want %d; %+v %+v", ret, c.verdict, mc.stats(b), mc.domainState(b))
				}
				ns = append(ns, d.Nanoseconds())
				mc.d.objs.McUdpWrites.Delete(held)
			}
			slices.Sort(ns)
			med := ns[len(ns)/2]
			b.ReportMetric(float64(med), "ns/pkt")
			if b.N > 1 { // not the calibration run
				fmt.Printf("RESULT name=memcached_udp/%s value=%d unit=ns/pkt samples=%d\n", c.name, med, b.N)
			}
		})
	}
}
