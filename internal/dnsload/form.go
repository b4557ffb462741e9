package dnsload

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
)

// Query types the forms ask for.
const (
	TypeA   uint16 = 1
	TypeSOA uint16 = 6
	TypeTXT uint16 = 16
	TypeOPT uint16 = 41
)

// A Question is a name (without the final dot) and a query type, class IN.
type Question struct {
	Name string
	Type uint16
}

// A Shape is how a client puts a question into a query: which header
// flags, which EDNS record. Each is what a real client sends (checked with
// the Debian 12 tools: dnsperf 2.10, kdig 3.2, dig 9.18), or a deliberate
// variation that offload rules must not take for another shape.
type Shape uint8

const (
	// Plain: no flags, no EDNS: the barest query (RD clear, as a resolver
	// asks an authoritative server).
	Plain Shape = iota
	// RD: recursion desired, no EDNS: dnsperf's default query.
	RD
	// RDAD: RD and AD, no EDNS: kdig's default query.
	RDAD
	// EDNS: RD, an OPT record for 4096 bytes with no options (dnsperf -e,
	// kdig +edns).
	EDNS
	// EDNSDO: EDNS with the DNSSEC OK bit (dnsperf -D).
	EDNSDO
	// Cookie: RD and AD, an OPT record for 1232 bytes with an 8-byte client
	// COOKIE: dig's default query. dig draws a fresh cookie per query;
	// here it is fixed per name, so that the form is one byte string.
	Cookie
	// Upper: RD, the name in upper case (a different form: the reply
	// echoes the question's case).
	Upper
	// Trailing: RD, one zero byte after the question (Knot answers
	// FORMERR).
	Trailing
	nShapes
)

// Shapes are every shape, in order.
var Shapes = func() []Shape {
	s := make([]Shape, nShapes)
	for i := range s {
		s[i] = Shape(i)
	}
	return s
}()

var shapeNames = [nShapes]string{"plain", "rd", "rd+ad", "edns", "edns+do", "cookie", "upper", "trailing"}

func (s Shape) String() string {
	if s < nShapes {
		return shapeNames[s]
	}
	return fmt.Sprintf("shape%d", s)
}

// ParseShape reads a shape's name (Shape.String).
func ParseShape(name string) (Shape, error) {
	for i, n := range shapeNames {
		if n == name {
			return Shape(i), nil
		}
	}
	return 0, fmt.Errorf("query shape %q: want one of %s", name, strings.Join(shapeNames[:], ", "))
}

// A Form is one exact query: a question in a shape. Bytes are the query
// after the transaction id, what an offload rule matches.
type Form struct {
	Question
	Shape Shape
	Bytes []byte
}

func (f Form) String() string { return fmt.Sprintf("%s/%d/%s", f.Name, f.Type, f.Shape) }

// Query is the form with transaction id txid.
func (f Form) Query(txid uint16) []byte {
	return append(binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(f.Bytes)), txid), f.Bytes...)
}

// Forms are every question in every shape: forms[i*len(shapes)+j] is
// questions[i] in shapes[j].
func Forms(questions []Question, shapes []Shape) []Form {
	forms := make([]Form, 0, len(questions)*len(shapes))
	for _, q := range questions {
		for _, s := range shapes {
			forms = append(forms, NewForm(q, s))
		}
	}
	return forms
}

// NewForm puts q into a query of shape s.
func NewForm(q Question, s Shape) Form {
	flags := map[Shape]uint16{RD: 0x0100, RDAD: 0x0120, EDNS: 0x0100, EDNSDO: 0x0100, Cookie: 0x0120,
		Upper: 0x0100, Trailing: 0x0100}[s]
	var opt []byte // the OPT record of the additional section
	switch s {
	case EDNS:
		opt = optRecord(4096, 0, nil)
	case EDNSDO:
		opt = optRecord(4096, 0x8000, nil)
	case Cookie:
		h := fnv.New64a()
		h.Write([]byte(q.Name))
		opt = optRecord(1232, 0, binary.BigEndian.AppendUint64([]byte{0, optCookie, 0, 8}, h.Sum64()))
	}
	b := binary.BigEndian.AppendUint16(nil, flags)
	b = append(b, 0, 1, 0, 0, 0, 0, 0, 0) // one question
	if opt != nil {
		b[9] = 1
	}
	name := q.Name
	if s == Upper {
		name = strings.ToUpper(name)
	}
	b = appendName(b, name)
	b = binary.BigEndian.AppendUint16(b, q.Type)
	b = append(b, 0, 1) // class IN
	b = append(b, opt...)
	if s == Trailing {
		b = append(b, 0)
	}
	return Form{Question: q, Shape: s, Bytes: b}
}

// optCookie is the EDNS option code of COOKIE (RFC 7873).
const optCookie = 10

// optRecord is an OPT pseudo-record: root name, the UDP payload size in
// the class, extended rcode 0, version 0, flags, options.
func optRecord(size, flags uint16, options []byte) []byte {
	b := []byte{0}
	b = binary.BigEndian.AppendUint16(b, TypeOPT)
	b = binary.BigEndian.AppendUint16(b, size)
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, uint16(len(options)))
	return append(b, options...)
}

// appendName appends name in labels ("" or "." is the root).
func appendName(b []byte, name string) []byte {
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if label != "" {
			b = append(append(b, byte(len(label))), label...)
		}
	}
	return append(b, 0)
}
