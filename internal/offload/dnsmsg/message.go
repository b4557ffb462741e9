// Package dnsmsg reads DNS messages (RFC 1035 wire format) as far as the
// offload agent needs: whether a query may be answered by a rule, whether
// the server's reply may become one, and the zone a name belongs to. It
// parses every byte of a message and refuses anything it cannot account
// for: a message is hostile input until proven otherwise.
package dnsmsg

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// HeaderLen is the length of the fixed header.
const HeaderLen = 12

// Header is the fixed header of a message.
type Header struct {
	ID, Flags        uint16
	QDCount, ANCount uint16
	NSCount, ARCount uint16
}

// Header flag bits and fields (RFC 1035 4.1.1).
const (
	flagQR = 1 << 15
	flagAA = 1 << 10
	flagTC = 1 << 9
	flagRA = 1 << 7
)

// QR is whether the message is a response.
func (h Header) QR() bool { return h.Flags&flagQR != 0 }

// Opcode is the kind of query (0: QUERY).
func (h Header) Opcode() int { return int(h.Flags>>11) & 0xf }

// AA is whether the answer is authoritative.
func (h Header) AA() bool { return h.Flags&flagAA != 0 }

// TC is whether the message was truncated.
func (h Header) TC() bool { return h.Flags&flagTC != 0 }

// RA is whether the server offers the asker recursion.
func (h Header) RA() bool { return h.Flags&flagRA != 0 }

// RCode is the header's 4-bit response code (EDNS extends it: Message.RCode).
func (h Header) RCode() int { return int(h.Flags & 0xf) }

// Record types and classes the agent looks at.
const (
	TypeSOA  = 6
	TypeSIG  = 24
	TypeOPT  = 41
	TypeDS   = 43
	TypeTSIG = 250
	ClassIN  = 1
)

// EDNS option codes (IANA "DNS EDNS0 Option Codes").
const (
	OptionECS    = 8
	OptionCookie = 10
)

// Response codes the agent offloads.
const (
	RCodeNoError  = 0
	RCodeNXDomain = 3
)

// RCodeRefused is the rcode an authoritative server gives for a name in
// none of its zones.
const RCodeRefused = 5

// Question is one entry of the question section.
type Question struct {
	Name        Name // as written: a question name is never compressed in a query
	Type, Class uint16
}

// RR is a resource record. Data is the RDATA as it lies in the message;
// names inside it may be compressed, so DataOff is kept to resolve them.
type RR struct {
	Name        Name // expanded
	Type, Class uint16
	TTL         uint32
	Data        []byte
	DataOff     int
}

// Message is a parsed message.
type Message struct {
	Header
	Question   []Question
	Answer     []RR
	Authority  []RR
	Additional []RR
	raw        []byte
	// qnameCompressed is whether a question name used a pointer.
	qnameCompressed bool
}

// ErrMalformed is wrapped by every parse error.
var ErrMalformed = errors.New("malformed DNS message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Parse parses a whole message: the header, every question and record,
// every name (following compression pointers, which must point backwards,
// so a loop is impossible), and nothing after the last record.
func Parse(msg []byte) (*Message, error) {
	if len(msg) < HeaderLen {
		return nil, malformed("%d bytes is shorter than the %d-byte header", len(msg), HeaderLen)
	}
	m := &Message{raw: msg, Header: Header{
		ID:      binary.BigEndian.Uint16(msg[0:]),
		Flags:   binary.BigEndian.Uint16(msg[2:]),
		QDCount: binary.BigEndian.Uint16(msg[4:]),
		ANCount: binary.BigEndian.Uint16(msg[6:]),
		NSCount: binary.BigEndian.Uint16(msg[8:]),
		ARCount: binary.BigEndian.Uint16(msg[10:]),
	}}
	// Each entry takes at least 5 bytes (question) or 11 (record): counts
	// beyond what the message can hold fail before anything is allocated.
	if min := 5*int(m.QDCount) + 11*(int(m.ANCount)+int(m.NSCount)+int(m.ARCount)); HeaderLen+min > len(msg) {
		return nil, malformed("counts %d/%d/%d/%d need at least %d bytes; the message has %d",
			m.QDCount, m.ANCount, m.NSCount, m.ARCount, HeaderLen+min, len(msg))
	}
	off := HeaderLen
	for i := range int(m.QDCount) {
		name, next, compressed, err := readName(msg, off)
		if err != nil {
			return nil, fmt.Errorf("question %d: %w", i, err)
		}
		if next+4 > len(msg) {
			return nil, malformed("question %d ends after the message", i)
		}
		m.qnameCompressed = m.qnameCompressed || compressed
		m.Question = append(m.Question, Question{Name: name,
			Type: binary.BigEndian.Uint16(msg[next:]), Class: binary.BigEndian.Uint16(msg[next+2:])})
		off = next + 4
	}
	sections := []struct {
		name  string
		count uint16
		into  *[]RR
	}{{"answer", m.ANCount, &m.Answer}, {"authority", m.NSCount, &m.Authority}, {"additional", m.ARCount, &m.Additional}}
	for _, s := range sections {
		for i := range int(s.count) {
			rr, next, err := readRR(msg, off)
			if err != nil {
				return nil, fmt.Errorf("%s record %d: %w", s.name, i, err)
			}
			*s.into = append(*s.into, rr)
			off = next
		}
	}
	if off != len(msg) {
		return nil, malformed("%d bytes after the last record", len(msg)-off)
	}
	return m, nil
}

func readRR(msg []byte, off int) (RR, int, error) {
	name, next, _, err := readName(msg, off)
	if err != nil {
		return RR{}, 0, err
	}
	if next+10 > len(msg) {
		return RR{}, 0, malformed("record header ends after the message")
	}
	rr := RR{Name: name,
		Type:  binary.BigEndian.Uint16(msg[next:]),
		Class: binary.BigEndian.Uint16(msg[next+2:]),
		TTL:   binary.BigEndian.Uint32(msg[next+4:]),
	}
	n := int(binary.BigEndian.Uint16(msg[next+8:]))
	rr.DataOff = next + 10
	if rr.DataOff+n > len(msg) {
		return RR{}, 0, malformed("record data of %d bytes ends after the message", n)
	}
	rr.Data = msg[rr.DataOff : rr.DataOff+n]
	return rr, rr.DataOff + n, nil
}

// NameAt reads the name at offset off of RR data (a byte of rr.Data), as
// in an SOA's MNAME: it may be compressed. It returns the name and the
// offset in rr.Data after it.
func (m *Message) NameAt(rr RR, off int) (Name, int, error) {
	if off < 0 || off >= len(rr.Data) {
		return nil, 0, malformed("no name at offset %d of %d bytes of record data", off, len(rr.Data))
	}
	name, next, _, err := readName(m.raw[:rr.DataOff+len(rr.Data)], rr.DataOff+off)
	if err != nil {
		return nil, 0, err
	}
	return name, next - rr.DataOff, nil
}
