package dnsmsg_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	. "github.com/santa-offload/santa/internal/offload/dnsmsg/dnstest"
)

// with returns b changed by f, for hand-damaged messages.
func with(b []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(b)) }

func setU16(off int, v uint16) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint16(b[off:], v); return b }
}

// longName is a name of n labels of 63 bytes.
func longName(n int) string {
	return strings.TrimSuffix(strings.Repeat(strings.Repeat("x", 63)+".", n), ".")
}

// queryOfLen is a query for an A record of exactly n bytes (n >= 18).
func queryOfLen(n int) []byte {
	name := ""
	for rest := n - 12 - 4 - 1; rest > 0; {
		l := min(rest-1, 63)
		name += strings.Repeat("x", l) + "."
		rest -= 1 + l
	}
	return Query(1, 0, name, TypeA)
}

func TestCheckQuery(t *testing.T) {
	plain := Query(0x1234, 0, "www.example.com", TypeA)
	edns := Query(0x1234, RD, "www.example.com", TypeA, OPT(1232))
	rr := A("www.example.com", 192, 0, 2, 1)
	tsig := RR{Name: "key.", Type: dnsmsg.TypeTSIG, Class: 255, Data: []byte("mac")}
	sig0 := RR{Name: ".", Type: dnsmsg.TypeSIG, Class: 255, Data: []byte("sig")}
	// The question name "www." written as "www" and a pointer to the
	// id's first byte, a zero: the root.
	compressed := append(Msg{ID: 0x0012}.Bytes(), 3, 'w', 'w', 'w', 0xc0, 0, 0, 1, 0, 1)
	compressed[5] = 1 // QDCOUNT
	fits := queryOfLen(dnsmsg.MaxQuery)
	tests := []struct {
		name string
		q    []byte
		want dnsmsg.Reason
	}{
		{"plain", plain, ""},
		{"EDNS without options, RD", edns, ""},
		{"EDNS with DO", Query(1, 0, "example.com", TypeA, RR{Name: ".", Type: dnsmsg.TypeOPT, Class: 1232, TTL: 1 << 15}), ""},
		{"longest that fits", fits, ""},
		{"one byte too long", queryOfLen(dnsmsg.MaxQuery + 1), dnsmsg.TooLong},
		{"empty", nil, dnsmsg.Malformed},
		{"short header", plain[:11], dnsmsg.Malformed},
		{"question cut", plain[:len(plain)-1], dnsmsg.Malformed},
		{"name cut", plain[:15], dnsmsg.Malformed},
		{"byte after the question", append(bytes.Clone(plain), 0), dnsmsg.Malformed},
		{"counts beyond the message", with(plain, setU16(10, 60000)), dnsmsg.Malformed},
		{"compressed question name", compressed, dnsmsg.Malformed},
		{"label type 0x40", with(plain, func(b []byte) []byte { b[12] = 0x43; return b }), dnsmsg.Malformed},
		{"label type 0x80", with(plain, func(b []byte) []byte { b[12] = 0x83; return b }), dnsmsg.Malformed},
		{"name over 255 bytes", Query(1, 0, longName(4), TypeA), dnsmsg.Malformed},
		{"response", Query(1, QR, "example.com", TypeA), dnsmsg.NotQuery},
		{"NOTIFY", Query(1, 4<<11, "example.com", dnsmsg.TypeSOA), dnsmsg.NotQuery},
		{"UPDATE", Query(1, 5<<11, "example.com", dnsmsg.TypeSOA), dnsmsg.NotQuery},
		{"no question", Msg{}.Bytes(), dnsmsg.Questions},
		{"two questions", Msg{Questions: []Question{Q("a.", TypeA), Q("b.", TypeA)}}.Bytes(), dnsmsg.Questions},
		{"answer record", Msg{Questions: []Question{Q("a.", TypeA)}, Answer: []RR{rr}}.Bytes(), dnsmsg.Records},
		{"authority record (IXFR)", Msg{Questions: []Question{Q("a.", 251)}, Authority: []RR{SOA("a.", 1)}}.Bytes(), dnsmsg.Records},
		{"two OPT", Query(1, 0, "a.", TypeA, OPT(1232), OPT(1232)), dnsmsg.Additional},
		{"additional A", Query(1, 0, "a.", TypeA, rr), dnsmsg.Additional},
		{"TSIG", Query(1, 0, "a.", TypeA, tsig), dnsmsg.TSIG},
		{"OPT and TSIG", Query(1, 0, "a.", TypeA, OPT(1232), tsig), dnsmsg.TSIG},
		{"SIG(0)", Query(1, 0, "a.", TypeA, sig0), dnsmsg.SIG0},
		{"cookie", Query(1, 0, "a.", TypeA, OPT(1232, Option(dnsmsg.OptionCookie, []byte("12345678")))), dnsmsg.Cookie},
		{"client subnet", Query(1, 0, "a.", TypeA, OPT(1232, Option(dnsmsg.OptionECS, []byte{0, 1, 24, 0, 192, 0, 2}))), dnsmsg.ECS},
		{"NSID", Query(1, 0, "a.", TypeA, OPT(1232, Option(3, nil))), dnsmsg.UnknownOption},
		{"padding", Query(1, 0, "a.", TypeA, OPT(1232, Option(12, make([]byte, 20)))), dnsmsg.UnknownOption},
		{"cut option", Query(1, 0, "a.", TypeA, OPT(1232, []byte{0, 10})), dnsmsg.Malformed},
		{"OPT not owned by the root", Query(1, 0, "a.", TypeA, RR{Name: "a.", Type: dnsmsg.TypeOPT, Class: 1232}), dnsmsg.Malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dnsmsg.CheckQuery(tt.q)
			if got := dnsmsg.ReasonOf(err); got != tt.want || (err != nil) != (tt.want != "") {
				t.Fatalf("CheckQuery = %v (reason %q); want reason %q", err, got, tt.want)
			}
		})
	}
	if len(fits) != dnsmsg.MaxQuery {
		t.Fatalf("the longest query that fits is %d bytes; want %d", len(fits), dnsmsg.MaxQuery)
	}
}

func TestCheckReply(t *testing.T) {
	q := Query(0xbeef, RD, "www.example.com", TypeA, OPT(1232))
	question := []Question{Q("www.example.com", TypeA)}
	answer := []RR{A("www.example.com", 192, 0, 2, 1)}
	reply := func(flags uint16, additional ...RR) []byte {
		return Msg{ID: 0xbeef, Flags: QR | flags, Questions: question, Answer: answer, Additional: additional}.Bytes()
	}
	ok := reply(AA|RD, OPT(1232))
	txt := func(n int) []byte {
		m := Msg{ID: 0xbeef, Flags: QR | AA, Questions: question, Answer: []RR{{Name: "www.example.com", Type: TypeTXT, Class: 1}}}
		m.Answer[0].Data = make([]byte, n-len(m.Bytes()))
		return m.Bytes()
	}
	tests := []struct {
		name  string
		reply []byte
		want  dnsmsg.Reason
	}{
		{"NOERROR", ok, ""},
		{"NXDOMAIN", Msg{ID: 0xbeef, Flags: QR | AA | 3, Questions: question, Authority: []RR{SOA("example.com", 7)}}.Bytes(), ""},
		{"1472 bytes", txt(1472), ""},
		{"1473 bytes", txt(1473), dnsmsg.ReplyTooLong},
		{"cut", ok[:len(ok)-1], dnsmsg.ReplyMalformed},
		{"byte after", append(bytes.Clone(ok), 0), dnsmsg.ReplyMalformed},
		{"QR clear", with(ok, setU16(2, AA)), dnsmsg.ReplyMalformed},
		{"other id", with(ok, setU16(0, 0xbeee)), dnsmsg.ReplyMalformed},
		{"question in other case", Msg{ID: 0xbeef, Flags: QR | AA, Questions: []Question{Q("WWW.example.com", TypeA)}, Answer: answer}.Bytes(), dnsmsg.ReplyMalformed},
		{"other question", Msg{ID: 0xbeef, Flags: QR | AA, Questions: []Question{Q("www.example.com", TypeAAAA)}}.Bytes(), dnsmsg.ReplyMalformed},
		{"no question", Msg{ID: 0xbeef, Flags: QR | AA}.Bytes(), dnsmsg.ReplyMalformed},
		{"truncated", reply(AA | TC), dnsmsg.Truncated},
		{"SERVFAIL", reply(AA | 2), dnsmsg.RCode},
		{"REFUSED", reply(5), dnsmsg.RCode},
		{"BADVERS in the OPT", reply(AA, RR{Name: ".", Type: dnsmsg.TypeOPT, Class: 1232, TTL: 1 << 24}), dnsmsg.RCode},
		{"TSIG", reply(AA, RR{Name: "key.", Type: dnsmsg.TypeTSIG, Class: 255, Data: []byte("mac")}), dnsmsg.TSIG},
		{"SIG(0)", reply(AA, RR{Name: ".", Type: dnsmsg.TypeSIG, Class: 255, Data: []byte("sig")}), dnsmsg.SIG0},
		{"not authoritative", reply(0), dnsmsg.NotAuthoritative},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dnsmsg.CheckReply(q, tt.reply)
			if got := dnsmsg.ReasonOf(err); got != tt.want || (err != nil) != (tt.want != "") {
				t.Fatalf("CheckReply (%d bytes) = %v (reason %q); want reason %q", len(tt.reply), err, got, tt.want)
			}
		})
	}
	// REFUSED is told from the other rcodes and from AA clear.
	for _, tt := range []struct {
		flags   uint16
		refused bool
	}{{5, true}, {AA | 5, true}, {AA | 2, false}, {0, false}, {AA, false}} {
		if _, err := dnsmsg.CheckReply(q, reply(tt.flags)); dnsmsg.Refused(err) != tt.refused {
			t.Errorf("flags %#x: Refused(%v) = %v", tt.flags, err, !tt.refused)
		}
	}
}

// A reply with RA set tells that the server offers recursion to the
// agent, which asks from the server's own host: BIND's allow-recursion
// and allow-query-cache default to "localnets; localhost;", so with
// BIND's default "recursion yes" a client elsewhere gets RA clear for
// the same query, and the agent's reply may carry data from the cache or
// the root hints that such a client never gets (an RD=0 query of a CNAME
// out of the server's zones: the agent's reply had the 13 root NS
// records in its authority section; a remote client's, the CNAME alone;
// BIND 9.18, found by a review). The kernel would give every client the
// agent's reply: it must not be offloaded.
func TestCheckReplyRefusesRecursionAvailable(t *testing.T) {
	const RA = 1 << 7
	q := Query(0xbeef, 0, "www.example.com", TypeA)
	reply := Msg{ID: 0xbeef, Flags: QR | AA | RA, Questions: []Question{Q("www.example.com", TypeA)},
		Answer: []RR{A("www.example.com", 192, 0, 2, 1)}}.Bytes()
	if _, err := dnsmsg.CheckReply(q, reply); err == nil {
		t.Fatal("a reply with RA set (recursion offered to the agent, not necessarily to every client) is accepted")
	}
}
