// Package dnstest writes DNS messages and runs a small authoritative DNS
// server on loopback, for the offload agent's tests.
package dnstest

import (
	"encoding/binary"
	"strings"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
)

// Header flags.
const (
	QR = 1 << 15
	AA = 1 << 10
	TC = 1 << 9
	RD = 1 << 8
)

// Record types.
const (
	TypeA     = 1
	TypeNS    = 2
	TypeCNAME = 5
	TypeTXT   = 16
	TypeAAAA  = 28
)

// Name is s ("www.example.com." or "www.example.com") in wire format.
func Name(s string) dnsmsg.Name {
	var n dnsmsg.Name
	for _, l := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if l != "" {
			n = append(append(n, byte(len(l))), l...)
		}
	}
	return append(n, 0)
}

// RR is a record to write. Data is written as is.
type RR struct {
	Name        string
	Type, Class uint16
	TTL         uint32
	Data        []byte
}

// Question is a question to write.
type Question struct {
	Name        string
	Type, Class uint16
}

// Msg is a message to write, without compression.
type Msg struct {
	ID, Flags                     uint16
	Questions                     []Question
	Answer, Authority, Additional []RR
}

// Bytes is the message in wire format.
func (m Msg) Bytes() []byte {
	b := make([]byte, dnsmsg.HeaderLen)
	binary.BigEndian.PutUint16(b[0:], m.ID)
	binary.BigEndian.PutUint16(b[2:], m.Flags)
	binary.BigEndian.PutUint16(b[4:], uint16(len(m.Questions)))
	binary.BigEndian.PutUint16(b[6:], uint16(len(m.Answer)))
	binary.BigEndian.PutUint16(b[8:], uint16(len(m.Authority)))
	binary.BigEndian.PutUint16(b[10:], uint16(len(m.Additional)))
	for _, q := range m.Questions {
		b = append(b, Name(q.Name)...)
		b = binary.BigEndian.AppendUint16(b, q.Type)
		b = binary.BigEndian.AppendUint16(b, q.Class)
	}
	for _, rrs := range [][]RR{m.Answer, m.Authority, m.Additional} {
		for _, rr := range rrs {
			b = AppendRR(b, rr)
		}
	}
	return b
}

// AppendRR appends rr in wire format.
func AppendRR(b []byte, rr RR) []byte {
	b = append(b, Name(rr.Name)...)
	b = binary.BigEndian.AppendUint16(b, rr.Type)
	b = binary.BigEndian.AppendUint16(b, rr.Class)
	b = binary.BigEndian.AppendUint32(b, rr.TTL)
	b = binary.BigEndian.AppendUint16(b, uint16(len(rr.Data)))
	return append(b, rr.Data...)
}

// Query is a query for name and type, class IN, with id and flags.
func Query(id, flags uint16, name string, qtype uint16, additional ...RR) []byte {
	return Msg{ID: id, Flags: flags, Questions: []Question{{name, qtype, dnsmsg.ClassIN}}, Additional: additional}.Bytes()
}

// A is an A record.
func A(name string, ip ...byte) RR {
	return RR{Name: name, Type: TypeA, Class: dnsmsg.ClassIN, TTL: 300, Data: ip}
}

// NS is an NS record.
func NS(name, target string) RR {
	return RR{Name: name, Type: TypeNS, Class: dnsmsg.ClassIN, TTL: 3600, Data: Name(target)}
}

// CNAME is a CNAME record.
func CNAME(name, target string) RR {
	return RR{Name: name, Type: TypeCNAME, Class: dnsmsg.ClassIN, TTL: 300, Data: Name(target)}
}

// SOA is apex's SOA record with serial.
func SOA(apex string, serial uint32) RR {
	d := append(Name("ns."+apex), Name("hostmaster."+apex)...)
	for _, v := range []uint32{serial, 3600, 600, 86400, 60} {
		d = binary.BigEndian.AppendUint32(d, v)
	}
	return RR{Name: apex, Type: dnsmsg.TypeSOA, Class: dnsmsg.ClassIN, TTL: 3600, Data: d}
}

// OPT is an EDNS OPT record advertising size, with options given as
// whole option bytes (code, length, data).
func OPT(size uint16, options ...[]byte) RR {
	var d []byte
	for _, o := range options {
		d = append(d, o...)
	}
	return RR{Name: ".", Type: dnsmsg.TypeOPT, Class: size, Data: d}
}

// Option is an EDNS option.
func Option(code uint16, data []byte) []byte {
	o := binary.BigEndian.AppendUint16(nil, code)
	o = binary.BigEndian.AppendUint16(o, uint16(len(data)))
	return append(o, data...)
}

// Q is a question of class IN.
func Q(name string, qtype uint16) Question {
	return Question{Name: name, Type: qtype, Class: dnsmsg.ClassIN}
}
