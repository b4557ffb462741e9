package datapath

// Packet fixtures through BPF_PROG_TEST_RUN. Needs root and a kernel with
// BTF, bpf_rdonly_cast and tcx (Linux 6.6+). The test run's device is the
// loopback of the test's network namespace, so the socket lookup finds the
// sockets the test binds on 127.0.0.1 and ::1.

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

const (
	metaSeen     = santaSantaMetaVerdictSANTA_META_SEEN
	metaFallback = santaSantaMetaVerdictSANTA_META_FALLBACK + santaSantaMetaVerdict(santaSantaServiceCounterSANTA_SVC_TC_CSUM)
)

const (
	xdpDrop       = 1
	xdpPass       = 2
	xdpTX         = 3
	tcActOK       = 0
	tcActRedirect = 7
)

func openTest(t testing.TB) *Datapath {
	t.Helper()
	return openTestWith(t, Options{MaxRules: 1 << 14, MaxServices: 256})
}

// openTestWith opens an unpinned data plane with opts.
func openTestWith(t testing.TB, opts Options) *Datapath {
	t.Helper()
	opts.NoPin = true
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// boundUDP opens a UDP socket on addr ("127.0.0.1:0", "[::1]:0").
func boundUDP(t testing.TB, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// register makes c a service of d.
func register(t testing.TB, d *Datapath, c *net.UDPConn) model.ServiceID {
	t.Helper()
	id, err := tryRegister(t, d, c)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// tryRegister makes c a service of d, or says why d refuses.
func tryRegister(t testing.TB, d *Datapath, c *net.UDPConn) (model.ServiceID, error) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var id model.ServiceID
	var aerr error
	if err := raw.Control(func(fd uintptr) { id, aerr = d.AddSocket(int(fd)) }); err != nil {
		t.Fatal(err)
	}
	return id, aerr
}

func local(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

// The test run's device is loopback, whose address is all zeros: a frame
// for any other MAC is not for this host.
var (
	clientMAC = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	serverMAC = [6]byte{}
)

func request(to netip.AddrPort, payload []byte) pkttest.UDPFrame {
	from := netip.MustParseAddrPort("127.0.0.2:40000")
	if to.Addr().Is6() {
		from = netip.MustParseAddrPort("[::1]:40000")
	}
	return pkttest.UDPFrame{SrcMAC: clientMAC, DstMAC: serverMAC, Src: from, Dst: to, Payload: payload, TTL: 17, IPID: 77}
}

func run(t testing.TB, prog *ebpf.Program, frame []byte) (uint32, []byte) {
	t.Helper()
	opts := ebpf.RunOptions{Data: frame, DataOut: make([]byte, 4096)}
	ret, err := prog.Run(&opts)
	if err != nil {
		t.Fatal(err)
	}
	return ret, opts.DataOut
}

// passedUnchanged is what XDP_PASS returns in a test run: the metadata
// santa_udp left for TC (4 bytes) before the untouched frame.
func passedUnchanged(frame []byte, verdict santaSantaMetaVerdict) []byte {
	meta := make([]byte, 4)
	binary.LittleEndian.PutUint32(meta, uint32(verdict))
	return append(meta, frame...)
}

func hello() rule.Rule {
	return rule.Rule{
		Condition:  rule.Condition{Offset: 0, Pattern: []byte("Hello")},
		Processors: []rule.Processor{rule.Put(0, []byte("COMSYS"))},
		ReplyLen:   6,
	}
}

func expectReply(r rule.Rule, req []byte) []byte {
	c, err := rule.Compile(r)
	if err != nil {
		panic(err)
	}
	out, ok := c.Reply(req)
	if !ok {
		panic("reference cannot build reply")
	}
	return out
}

func TestXDPFixtures(t *testing.T) {
	d := openTest(t)
	v4 := boundUDP(t, "127.0.0.1:0")
	v6 := boundUDP(t, "[::1]:0")
	other := boundUDP(t, "127.0.0.1:0") // a socket with no rules
	s4, s6 := register(t, d, v4), register(t, d, v6)

	// Rules on the IPv4 service, ids in this order.
	comsys := rule.Rule{Condition: rule.Condition{Offset: 0, Pattern: []byte("COMSYS")},
		Processors: []rule.Processor{rule.Put(0, []byte("long"))}, ReplyLen: 4}
	com := rule.Rule{Condition: rule.Condition{Offset: 0, Pattern: []byte("COM")},
		Processors: []rule.Processor{rule.Put(0, []byte("short"))}, ReplyLen: 5}
	sys := rule.Rule{Condition: rule.Condition{Offset: 3, Pattern: []byte("SYS")},
		Processors: []rule.Processor{rule.Put(0, []byte("sys"))}, ReplyLen: 3}
	abcd := rule.Rule{Condition: rule.Condition{Offset: 0, Pattern: []byte("ABCD")},
		Processors: []rule.Processor{rule.Put(0, []byte("abcd"))}, ReplyLen: 4}
	efgh := rule.Rule{Condition: rule.Condition{Offset: 4, Pattern: []byte("EFGH")},
		Processors: []rule.Processor{rule.Put(0, []byte("efgh"))}, ReplyLen: 4}
	dns := pkttest.DNSRule("www.example.com", []byte{0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1})
	collA, collB := fnvCollision(t)
	ca := rule.Rule{Condition: rule.Condition{Offset: 0, Pattern: collA},
		Processors: []rule.Processor{rule.Put(0, []byte("A"))}, ReplyLen: 1}
	cb := rule.Rule{Condition: rule.Condition{Offset: 0, Pattern: collB},
		Processors: []rule.Processor{rule.Put(0, []byte("B"))}, ReplyLen: 1}

	ids, err := d.AddRules(s4, []rule.Rule{hello(), comsys, com, sys, abcd, efgh, dns, ca, cb})
	if err != nil {
		t.Fatal(err)
	}
	helloID, comsysID, _, _, abcdID, _, dnsID, caID, cbID := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6], ids[7], ids[8]
	id6, err := d.AddRule(s6, hello())
	if err != nil {
		t.Fatal(err)
	}

	to4, to6 := local(v4), local(v6)
	query := pkttest.DNSQuery(0xbeef, "www.example.com")
	fragment := request(to4, []byte("Hello")).Bytes()
	fragment[14+6] |= 0x20 // more fragments
	pkttest.FixIPv4Checksum(fragment)
	options := request(to4, []byte("Hello")).Bytes()
	options[14] = 0x46 // ihl 6: the data plane must not look further
	truncated := request(to4, []byte("Hello")).Bytes()
	truncated = truncated[:len(truncated)-2]
	badCsum := request(to4, []byte("Hello")).Bytes()
	badCsum[14+20+6] ^= 0xff // UDP checksum field
	noCsum := request(to4, []byte("Hello"))
	noCsum.NoUDPCsum = true
	tcpFrame := request(to4, []byte("Hello")).Bytes()
	tcpFrame[14+9] = 6
	pkttest.FixIPv4Checksum(tcpFrame)

	cases := []struct {
		name     string
		frame    pkttest.UDPFrame
		raw      []byte // used instead of frame when set
		verdict  uint32
		reply    []byte                // expected reply payload (XDP_TX)
		meta     santaSantaMetaVerdict // expected metadata on XDP_PASS
		path     string
		ruleHit  model.RuleID
		hitsWant uint64
	}{
		{name: "match", frame: request(to4, []byte("Hello")), verdict: xdpTX, reply: []byte("COMSYS"), path: "answered", ruleHit: helloID, hitsWant: 1},
		{name: "match with trailing bytes", frame: request(to4, []byte("Hello, world")), verdict: xdpTX, reply: []byte("COMSYS"), path: "answered", ruleHit: helloID, hitsWant: 2},
		{name: "miss", frame: request(to4, []byte("Hellx")), verdict: xdpPass, meta: metaSeen, path: "service_pass"},
		{name: "shorter than condition", frame: request(to4, []byte("Hell")), verdict: xdpPass, meta: metaSeen, path: "service_pass"},
		{name: "partial overlap", frame: request(to4, []byte("COMSYX")), verdict: xdpTX, reply: []byte("short"), path: "answered"},
		{name: "tie-break longest", frame: request(to4, []byte("COMSYS")), verdict: xdpTX, reply: []byte("long"), path: "answered", ruleHit: comsysID, hitsWant: 1},
		{name: "tie-break lowest id", frame: request(to4, []byte("ABCDEFGH")), verdict: xdpTX, reply: []byte("abcd"), path: "answered", ruleHit: abcdID, hitsWant: 1},
		{name: "hash collision A", frame: request(to4, collA), verdict: xdpTX, reply: []byte("A"), path: "answered", ruleHit: caID, hitsWant: 1},
		{name: "hash collision B", frame: request(to4, collB), verdict: xdpTX, reply: []byte("B"), path: "answered", ruleHit: cbID, hitsWant: 1},
		{name: "copy processor", frame: request(to4, query), verdict: xdpTX, reply: expectReply(dns, query), path: "answered", ruleHit: dnsID, hitsWant: 1},
		{name: "ipv6", frame: request(to6, []byte("Hello")), verdict: xdpTX, reply: []byte("COMSYS"), path: "answered", ruleHit: id6, hitsWant: 1},
		{name: "no udp checksum", frame: noCsum, verdict: xdpTX, reply: []byte("COMSYS"), path: "answered", ruleHit: helloID, hitsWant: 3},
		{name: "bad checksum left to TC", raw: badCsum, verdict: xdpPass, meta: metaFallback, path: "fallback_checksum"},
		{name: "fragment", raw: fragment, verdict: xdpPass, meta: metaSeen, path: "fragment"},
		{name: "ip options", raw: options, verdict: xdpPass, meta: metaSeen, path: "ip_options"},
		{name: "truncated", raw: truncated, verdict: xdpPass, meta: metaSeen, path: "bad_length"},
		{name: "not udp", raw: tcpFrame, verdict: xdpPass, meta: metaSeen, path: "not_udp"},
		{name: "socket without rules", frame: request(local(other), []byte("Hello")), verdict: xdpPass, meta: metaSeen, path: "not_service"},
		{name: "no socket", frame: request(netip.MustParseAddrPort("127.0.0.1:9"), []byte("Hello")), verdict: xdpPass, meta: metaSeen, path: "no_socket"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.raw
			if in == nil {
				in = tc.frame.Bytes()
			}
			before, err := d.PathStats()
			if err != nil {
				t.Fatal(err)
			}
			verdict, out := run(t, d.XDPProgram(), in)
			if verdict != tc.verdict {
				t.Fatalf("verdict %d, want %d", verdict, tc.verdict)
			}
			var want []byte
			if tc.verdict == xdpTX {
				want = tc.frame.Reply(tc.reply).Bytes()
			} else {
				want = passedUnchanged(in, tc.meta)
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("output\n got %x\nwant %x", out, want)
			}
			after, err := d.PathStats()
			if err != nil {
				t.Fatal(err)
			}
			if after[tc.path] != before[tc.path]+1 {
				t.Errorf("path %q counted %d times, want 1", tc.path, after[tc.path]-before[tc.path])
			}
			if tc.ruleHit != 0 || tc.hitsWant != 0 {
				st, err := d.RuleStats(tc.ruleHit)
				if err != nil {
					t.Fatal(err)
				}
				if st.Hits != tc.hitsWant {
					t.Errorf("rule %d hits %d, want %d", tc.ruleHit, st.Hits, tc.hitsWant)
				}
			}
		})
	}

	st, err := d.ServiceStats(s4)
	if err != nil {
		t.Fatal(err)
	}
	if want := (model.ServiceStats{Matched: 9, Passed: 2}); st != want {
		t.Errorf("service stats %+v, want %+v", st, want)
	}

	// After RemoveService the socket's packets pass, as any other socket's.
	if err := d.RemoveService(s6); err != nil {
		t.Fatal(err)
	}
	in := request(to6, []byte("Hello")).Bytes()
	if verdict, out := run(t, d.XDPProgram(), in); verdict != xdpPass || !bytes.Equal(out, passedUnchanged(in, metaSeen)) {
		t.Fatalf("after RemoveService: verdict %d, output %x", verdict, out)
	}
}

// fnvCollision finds two distinct 6-byte patterns with equal FNV-1a hashes,
// so that two rules share one index key and only the full compare tells them
// apart. A birthday search: about 2^16 random patterns suffice on average.
func fnvCollision(t testing.TB) ([]byte, []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	seen := make(map[uint32][]byte, 1<<20)
	for range 1 << 22 {
		p := make([]byte, 6)
		for i := range p {
			p[i] = 'a' + byte(rng.IntN(26))
		}
		h := rules.FNV1a(rules.FNVOffset, p)
		if q, ok := seen[h]; ok && !bytes.Equal(p, q) {
			return q, p
		}
		seen[h] = p
	}
	t.Fatal("no FNV-1a collision found")
	return nil, nil
}
