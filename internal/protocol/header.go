package protocol

import (
	"encoding/binary"
	"syscall"
)

// Header constants.
const (
	Magic      = 0x41544e53 // the bytes "SNTA"
	HeaderLen  = 16
	MaxMessage = 131072 // bytes in a message, header included
)

// Protocol versions (docs/protocol.md). A message's header carries the
// version its body is encoded in; HELLO agrees on one per connection.
const (
	// Version1 is the first version, which every daemon reads: HELLO is
	// sent in it.
	Version1 = 1
	// Version2 adds a rule's length condition (flags bit 0).
	Version2 = 2
	// Version3 adds the fresh flag of GENERATION's reply.
	Version3 = 3
	// Version4 adds MEMCACHED_STATS's filled.
	Version4 = 4
	// Version5 pages HOT (its request's from, its reply's window and
	// total).
	Version5 = 5
	// Version6 adds LEARN's counts and HOT's reply's counted_ppm.
	Version6 = 6
	// Version7 pages LIST_SERVICES (its request's start and max, its
	// reply's next), as LIST_RULES is paged.
	Version7 = 7

	MinVersion = Version1 // the oldest version this side speaks
	MaxVersion = Version7 // the newest
)

// le is the byte order of every integer of the protocol.
var le = binary.LittleEndian

// Header is the part of a message header that varies; magic is a
// constant.
type Header struct {
	Version uint16 // the version the body is encoded in
	Type    Type
	Length  uint32 // the whole message, header included
	Seq     uint32 // chosen by the client, echoed by the reply
}

func appendHeader(b []byte, h Header) []byte {
	b = le.AppendUint32(b, Magic)
	b = le.AppendUint16(b, h.Version)
	b = le.AppendUint16(b, uint16(h.Type))
	b = le.AppendUint32(b, h.Length)
	return le.AppendUint32(b, h.Seq)
}

// decodeHeader reads and checks the header of the datagram msg. The header
// is returned as read even when it is refused, so that a server can still
// echo its seq in the ERROR reply.
//
// The length field is compared with MaxMessage before it is compared with
// the datagram's size: a reader with a MaxMessage-byte buffer holds only a
// prefix of a larger datagram, and must call that EMSGSIZE, not EPROTO.
func decodeHeader(msg []byte) (Header, error) {
	var h Header
	if len(msg) >= HeaderLen {
		h = Header{Version: le.Uint16(msg[4:]), Type: Type(le.Uint16(msg[6:])), Length: le.Uint32(msg[8:]), Seq: le.Uint32(msg[12:])}
	}
	switch {
	case len(msg) > MaxMessage:
		return h, Errorf(syscall.EMSGSIZE, "message is %d bytes; the limit is %d", len(msg), MaxMessage)
	case len(msg) < HeaderLen:
		return h, Errorf(syscall.EPROTO, "message is %d bytes, shorter than the %d-byte header", len(msg), HeaderLen)
	case le.Uint32(msg) != Magic:
		return h, Errorf(syscall.EPROTO, "bad magic %#08x", le.Uint32(msg))
	case !Speaks(h.Version):
		return h, Errorf(syscall.EPROTO, "header version %d; this side speaks versions %d to %d", h.Version, MinVersion, MaxVersion)
	case h.Length > MaxMessage:
		return h, Errorf(syscall.EMSGSIZE, "length field is %d; the limit is %d", h.Length, MaxMessage)
	case h.Length != uint32(len(msg)):
		return h, Errorf(syscall.EPROTO, "length field is %d but the message is %d bytes", h.Length, len(msg))
	case !h.Type.Known():
		return h, Errorf(syscall.EPROTO, "unknown %v", h.Type)
	}
	return h, nil
}

// Speaks reports whether this side reads and writes version v.
func Speaks(v uint16) bool { return v >= MinVersion && v <= MaxVersion }
