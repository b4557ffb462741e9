package dnsload

import (
	"bytes"
	"fmt"
	"net"
	"slices"

	"github.com/santa-offload/santa/internal/udpask"
)

// An Expect is the reply a server gives to a form, as Capture recorded
// it: transaction id 0 and, for a Cookie form, the server's cookie zeroed.
// A reply matches it when it is the same bytes but for those (Matches).
type Expect struct {
	Reply []byte
	// AnyOrder: the answer has several records of one type, which a
	// server may send in any order (BIND rotates them), or the server
	// answered in different orders: a reply with the same records in any
	// order matches.
	AnyOrder bool
}

// Capture asks the server through conn each form tries times (at least
// 2) and returns what each reply must be, forms[i]'s at [i]. Replies to
// one form that differ in more than the order of the answer records are
// an error: such a form has no one expected reply.
func Capture(conn net.Conn, forms []Form, tries int) ([]Expect, error) {
	if tries < 2 {
		return nil, fmt.Errorf("capture: %d tries, want at least 2", tries)
	}
	items := make([]int, len(forms)*tries)
	for i := range items {
		items[i] = i % len(forms)
	}
	replies, err := udpask.Replies(conn, func(id uint16, i int) []byte { return forms[i].Query(id) }, items)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	expect := make([]Expect, len(forms))
	for i, f := range forms {
		e := Expect{Reply: replies[i]}
		if err := normalize(f, e.Reply); err != nil {
			return nil, fmt.Errorf("capture: reply to %v: %w", f, err)
		}
		e.AnyOrder = severalOfAType(e.Reply)
		for try := 1; try < tries; try++ {
			r := replies[try*len(forms)+i]
			if err := normalize(f, r); err != nil {
				return nil, fmt.Errorf("capture: reply to %v: %w", f, err)
			}
			if bytes.Equal(r, e.Reply) {
				continue
			}
			if !sameRecords(r, e.Reply) {
				return nil, fmt.Errorf("capture: %v has no one reply:\n%x\n%x", f, e.Reply, r)
			}
			e.AnyOrder = true
		}
		expect[i] = e
	}
	return expect, nil
}

// Matches reports whether reply (any transaction id; not modified) is e's
// reply to form f.
func (e Expect) Matches(f Form, reply []byte) bool {
	if len(reply) != len(e.Reply) || len(reply) < 12 {
		return false
	}
	if f.Shape == Cookie || e.AnyOrder {
		reply = slices.Clone(reply)
		if normalize(f, reply) != nil {
			return false
		}
	}
	if bytes.Equal(reply[2:], e.Reply[2:]) {
		return true
	}
	return e.AnyOrder && sameRecords(reply, e.Reply)
}

// Equal reports whether e and o expect the same replies.
func (e Expect) Equal(o Expect) bool {
	return e.AnyOrder == o.AnyOrder && (bytes.Equal(e.Reply, o.Reply) || e.AnyOrder && sameRecords(e.Reply, o.Reply))
}

// severalOfAType reports whether reply's answer has two records of a type.
func severalOfAType(reply []byte) bool {
	m, err := parse(reply)
	if err != nil {
		return false
	}
	seen := map[uint16]bool{}
	for _, r := range m.sections[0] {
		if seen[r.typ] {
			return true
		}
		seen[r.typ] = true
	}
	return false
}

// normalize zeroes reply's transaction id, and the server cookie of a
// reply to a Cookie form, in place.
func normalize(f Form, reply []byte) error {
	if len(reply) < 12 {
		return errShort
	}
	reply[0], reply[1] = 0, 0
	if f.Shape == Cookie {
		return maskServerCookie(reply)
	}
	return nil
}

// sameRecords reports whether a and b are the same message but for the
// order of their answer records. The answer's owner names are compared in
// place (the first one is spelled out, the others point to it), the rest
// of each record (type, class, TTL, data) as a set.
func sameRecords(a, b []byte) bool {
	ma, err := parse(a)
	if err != nil {
		return false
	}
	mb, err := parse(b)
	if err != nil || !bytes.Equal(ma.head, mb.head) || len(ma.sections[0]) != len(mb.sections[0]) {
		return false
	}
	var ta, tb [][]byte
	for i, ra := range ma.sections[0] {
		rb := mb.sections[0][i]
		if !bytes.Equal(a[ra.start:ra.data-10], b[rb.start:rb.data-10]) {
			return false
		}
		ta, tb = append(ta, a[ra.data-10:ra.end]), append(tb, b[rb.data-10:rb.end])
	}
	slices.SortFunc(ta, bytes.Compare)
	slices.SortFunc(tb, bytes.Compare)
	if !slices.EqualFunc(ta, tb, bytes.Equal) {
		return false
	}
	// The rest follows the answer.
	return bytes.Equal(a[answerEnd(ma):], b[answerEnd(mb):])
}

// answerEnd is the offset where m's answer section ends.
func answerEnd(m message) int {
	if n := len(m.sections[0]); n > 0 {
		return m.sections[0][n-1].end
	}
	return len(m.head)
}
