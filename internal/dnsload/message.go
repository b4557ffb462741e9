package dnsload

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// message is a DNS message cut into its parts: the header and question
// (head), then each resource record by section (answer, authority,
// additional).
type message struct {
	head     []byte
	sections [3][]record
}

// A record is one resource record of a message.
type record struct {
	bytes []byte // the whole record, its name as it is (pointers stay)
	typ   uint16
	// start, data and end are the offsets of its start, of its data
	// and of its end in the message.
	start, data, end int
}

var errShort = errors.New("message ends early")

// parse cuts msg into its parts. Names are skipped, not followed:
// compression pointers stay as they are in the record bytes.
func parse(msg []byte) (message, error) {
	var m message
	if len(msg) < 12 {
		return m, errShort
	}
	off := 12
	for range binary.BigEndian.Uint16(msg[4:]) {
		end, err := skipName(msg, off)
		if err != nil {
			return m, err
		}
		if off = end + 4; off > len(msg) {
			return m, errShort
		}
	}
	m.head = msg[:off]
	for s := range m.sections {
		for range binary.BigEndian.Uint16(msg[6+2*s:]) {
			end, err := skipName(msg, off)
			if err != nil {
				return m, err
			}
			if end+10 > len(msg) {
				return m, errShort
			}
			r := record{typ: binary.BigEndian.Uint16(msg[end:]), start: off, data: end + 10}
			end += 10 + int(binary.BigEndian.Uint16(msg[end+8:]))
			if end > len(msg) {
				return m, errShort
			}
			r.bytes, r.end = msg[off:end], end
			m.sections[s] = append(m.sections[s], r)
			off = end
		}
	}
	if off != len(msg) {
		return m, fmt.Errorf("%d bytes after the last record", len(msg)-off)
	}
	return m, nil
}

// skipName returns the offset after the name at off.
func skipName(msg []byte, off int) (int, error) {
	for {
		if off >= len(msg) {
			return 0, errShort
		}
		switch l := int(msg[off]); {
		case l == 0:
			return off + 1, nil
		case l&0xc0 == 0xc0: // compression pointer: the name ends here
			if off+2 > len(msg) {
				return 0, errShort
			}
			return off + 2, nil
		case l&0xc0 != 0:
			return 0, fmt.Errorf("label type %#x at %d", l&0xc0, off)
		default:
			off += 1 + l
		}
	}
}

// maskServerCookie zeroes the server's part of a COOKIE option in msg's
// OPT record, in place: servers make it from the time, so it differs from
// one reply to the next. The client cookie (its first 8 bytes) stays.
func maskServerCookie(msg []byte) error {
	m, err := parse(msg)
	if err != nil {
		return err
	}
	for _, r := range m.sections[2] {
		if r.typ != TypeOPT {
			continue
		}
		for opts := msg[r.data:r.end]; len(opts) >= 4; {
			code, n := binary.BigEndian.Uint16(opts), int(binary.BigEndian.Uint16(opts[2:]))
			if 4+n > len(opts) {
				return errShort
			}
			if code == optCookie && n > 8 {
				clear(opts[4+8 : 4+n])
			}
			opts = opts[4+n:]
		}
	}
	return nil
}

// rcodeServfail is SERVFAIL's RCODE (RFC 1035 4.1.1).
const rcodeServfail = 2

// rcode is the RCODE of msg's header, which must be whole (12 bytes).
func rcode(msg []byte) byte { return msg[3] & 0xf }

// SOASerial is the serial of the SOA record in reply's answer section.
func SOASerial(reply []byte) (uint32, error) {
	m, err := parse(reply)
	if err != nil {
		return 0, err
	}
	if rcode := rcode(reply); rcode != 0 {
		return 0, fmt.Errorf("rcode %d", rcode)
	}
	for _, r := range m.sections[0] {
		if r.typ != TypeSOA {
			continue
		}
		// The primary's name, the mailbox, then the serial.
		off, err := skipName(reply, r.data)
		if err == nil {
			off, err = skipName(reply, off)
		}
		if err != nil || off+4 > len(reply) {
			return 0, fmt.Errorf("bad SOA record")
		}
		return binary.BigEndian.Uint32(reply[off:]), nil
	}
	return 0, errors.New("no SOA record in the answer")
}
