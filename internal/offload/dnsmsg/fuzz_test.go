package dnsmsg_test

import (
	"bytes"
	"testing"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	. "github.com/santa-offload/santa/internal/offload/dnsmsg/dnstest"
	"github.com/santa-offload/santa/rule"
)

// FuzzCheck feeds hostile queries and replies: parsing never panics nor
// loops, and whatever passes both checks becomes a valid rule that gives
// exactly the reply (with the request's id) to exactly the query.
func FuzzCheck(f *testing.F) {
	q := Query(7, RD, "www.example.com", TypeA, OPT(1232))
	r := Msg{ID: 7, Flags: QR | AA | RD, Questions: []Question{Q("www.example.com", TypeA)},
		Answer: []RR{CNAME("www.example.com", "x.example.com"), A("x.example.com", 192, 0, 2, 1)}, Authority: []RR{SOA("example.com", 3)}}.Bytes()
	f.Add(q, r)
	f.Add(q[:20], r[:30])
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, []byte{0, 0, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0xc0, 17})
	f.Fuzz(func(t *testing.T, query, reply []byte) {
		if m, err := dnsmsg.Parse(reply); err == nil {
			m.Apex()
			if len(m.Question) > 0 {
				m.ZoneNames()
			}
			for _, rr := range m.Answer {
				m.NameAt(rr, 0)
			}
		}
		if _, err := dnsmsg.CheckQuery(query); err != nil {
			return
		}
		if _, err := dnsmsg.CheckReply(query, reply); err != nil {
			return
		}
		rl := dnsmsg.Rule(query, reply)
		if err := rl.Validate(rule.DefaultUDPLimits); err != nil {
			t.Fatalf("rule of an accepted query and reply: %v", err)
		}
		c, err := rule.Compile(rl)
		if err != nil {
			t.Fatal(err)
		}
		other := bytes.Clone(query)
		other[0]++
		got, ok := c.Reply(other)
		if !rl.Condition.Matches(other) || !ok || !bytes.Equal(got[2:], reply[2:]) || !bytes.Equal(got[:2], other[:2]) {
			t.Fatalf("rule answers %x with %x; want the reply with the id", other, got)
		}
	})
}
