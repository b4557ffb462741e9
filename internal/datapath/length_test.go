package datapath

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/rule"
)

// Length conditions through XDP and TC: a request one byte longer or
// shorter than a rule allows passes, or goes to a less specific rule that
// allows it; rules of one pattern answer by length.
func TestLengthConditionFixtures(t *testing.T) {
	d := openTest(t)
	v4 := boundUDP(t, "127.0.0.1:0")
	v6 := boundUDP(t, "[::1]:0")
	put := func(c rule.Condition, reply string) rule.Rule {
		return rule.Rule{Condition: c, Processors: []rule.Processor{rule.Put(0, []byte(reply))}, ReplyLen: uint16(len(reply))}
	}
	cond := func(p string, min, max uint16) rule.Condition {
		return rule.Condition{Pattern: []byte(p), MinLen: min, MaxLen: max}
	}
	query := pkttest.DNSQuery(0xbeef, "len.example")
	dns := pkttest.DNSRule("len.example", []byte{1, 2, 3, 4})
	dns.Condition = rule.ExactLength(dns.Condition, uint16(len(query)))
	rs := []rule.Rule{
		dns,
		put(cond("LEN", 10, 12), "ten-twelve"),
		put(cond("LE", 0, 0), "prefix"), // any length: what LEN's range leaves
		put(rule.ExactLength(cond("VAR", 0, 0), 5), "five"),
		put(rule.ExactLength(cond("VAR", 0, 0), 6), "six"),
		put(cond("VAR", 8, 0), "eight and more"),
		put(cond("MAX", 0, 4), "up to four"),
	}
	for _, c := range []*net.UDPConn{v4, v6} {
		if _, err := d.AddRules(register(t, d, c), rs); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		payload []byte
		reply   []byte // nil: passes
	}{
		{"dns query of the rule's length", query, expectReply(dns, query)},
		{"dns query with one byte more", append(bytes.Clone(query), 0), nil},
		{"dns query one byte short", query[:len(query)-1], nil},
		{"below the range, to the prefix rule", []byte("LEN456789"), []byte("prefix")},
		{"lowest length of the range", []byte("LEN4567890"), []byte("ten-twelve")},
		{"highest length of the range", []byte("LEN456789012"), []byte("ten-twelve")},
		{"above the range, to the prefix rule", []byte("LEN4567890123"), []byte("prefix")},
		{"variant of five bytes", []byte("VAR45"), []byte("five")},
		{"variant of six bytes", []byte("VAR456"), []byte("six")},
		{"no variant of seven bytes", []byte("VAR4567"), nil},
		{"open range, its least", []byte("VAR45678"), []byte("eight and more")},
		{"open range, far above", bytes.Repeat([]byte("VAR"), 400), []byte("eight and more")},
		{"no variant of four bytes", []byte("VAR4"), nil},
		{"upper bound only, at it", []byte("MAX4"), []byte("up to four")},
		{"upper bound only, one above", []byte("MAX45"), nil},
		{"upper bound only, the pattern alone", []byte("MAX"), []byte("up to four")},
	}
	for _, prog := range []struct {
		name         string
		p            *ebpf.Program
		answer, pass uint32
		passed       func(in []byte) []byte // the output of a passed frame
	}{
		{"xdp", d.XDPProgram(), xdpTX, xdpPass, func(in []byte) []byte { return passedUnchanged(in, metaSeen) }},
		{"tc", d.TCProgram(), tcActRedirect, tcActOK, func(in []byte) []byte { return in }},
	} {
		for _, c := range []*net.UDPConn{v4, v6} {
			addr := local(c)
			for _, tc := range cases {
				t.Run(prog.name+"/"+addr.Addr().String()+"/"+tc.name, func(t *testing.T) {
					frame := request(addr, tc.payload)
					in := frame.Bytes()
					verdict, out := run(t, prog.p, in)
					want, wantVerdict := prog.passed(in), prog.pass
					if tc.reply != nil {
						want, wantVerdict = frame.Reply(tc.reply).Bytes(), prog.answer
					}
					if verdict != wantVerdict || !bytes.Equal(out, want) {
						t.Fatalf("verdict %d, want %d; output\n got %x\nwant %x", verdict, wantVerdict, out, want)
					}
				})
			}
		}
	}
}

// Over TCP a rule answers a segment its condition ends, and its length
// range is checked too: a rule of exactly its condition's length answers
// that segment, a segment one byte longer goes to the application. A range
// that leaves out the condition's end could never answer, and is refused.
func TestTCPLengthCondition(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	req := "GET /len\n"
	exact := tcpRule(req, []byte("exact\n"))
	exact.Condition = rule.ExactLength(exact.Condition, uint16(len(req)))
	if _, err := r.d.AddRule(r.svc, exact); err != nil {
		t.Fatal(err)
	}
	longer := tcpRule("GET /longer\n", []byte("never\n"))
	longer.Condition.MinLen = uint16(longer.Condition.End() + 1)
	_, err := r.d.AddRule(r.svc, longer)
	if want := "condition min length is 13 bytes; the limit is 12 (the condition's end, where a TCP rule's request must end): the rule could never answer a request"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("AddRule = %v; want %q", err, want)
	}
	c := r.dial(t, "tcp4")
	exchange(t, c, []byte(req), []byte("exact\n"))
	exchange(t, c, []byte(req+"x\n"), []byte("APP:"+req+"APP:x\n"))
	r.expectCounts(t, 1, 1, 1)
}
