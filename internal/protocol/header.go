package protocol

import (
	"encoding/binary"
	"syscall"
)

// Header constants of protocol version 1.
const (
	Magic      = 0x41544e53 // the bytes "SNTA"
	Version    = 1
	HeaderLen  = 16
	MaxMessage = 131072 // bytes in a message, header included
)

// le is the byte order of every integer of the protocol.
var le = binary.LittleEndian

// Header is the part of a message header that varies; magic and version
// are constants.
type Header struct {
	Type   Type
	Length uint32 // the whole message, header included
	Seq    uint32 // chosen by the client, echoed by the reply
}

func appendHeader(b []byte, h Header) []byte {
	b = le.AppendUint32(b, Magic)
	b = le.AppendUint16(b, Version)
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
		h = Header{Type: Type(le.Uint16(msg[6:])), Length: le.Uint32(msg[8:]), Seq: le.Uint32(msg[12:])}
	}
	switch {
	case len(msg) > MaxMessage:
		return h, Errorf(syscall.EMSGSIZE, "message is %d bytes; the limit is %d", len(msg), MaxMessage)
	case len(msg) < HeaderLen:
		return h, Errorf(syscall.EPROTO, "message is %d bytes, shorter than the %d-byte header", len(msg), HeaderLen)
	case le.Uint32(msg) != Magic:
		return h, Errorf(syscall.EPROTO, "bad magic %#08x", le.Uint32(msg))
	case le.Uint16(msg[4:]) != Version:
		return h, Errorf(syscall.EPROTO, "header version %d; this is version %d", le.Uint16(msg[4:]), Version)
	case h.Length > MaxMessage:
		return h, Errorf(syscall.EMSGSIZE, "length field is %d; the limit is %d", h.Length, MaxMessage)
	case h.Length != uint32(len(msg)):
		return h, Errorf(syscall.EPROTO, "length field is %d but the message is %d bytes", h.Length, len(msg))
	case !h.Type.Known():
		return h, Errorf(syscall.EPROTO, "unknown %v", h.Type)
	}
	return h, nil
}
