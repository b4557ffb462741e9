package dnsmsg

import (
	"strings"
)

// Name is a domain name in wire format, uncompressed: length-prefixed
// labels ending with the root's zero byte.
type Name []byte

// Limits of RFC 1035 2.3.4.
const (
	maxLabel = 63
	maxName  = 255 // wire bytes, the root's zero included
)

// readName reads the name at msg[off:]. It returns the name, the offset
// after it where it lies in the message (after the first pointer if it is
// compressed) and whether it used a pointer. A pointer must point before
// the start of the labels read since the last jump: the jumps go ever
// backwards, so no loop can be built, whatever the message.
func readName(msg []byte, off int) (Name, int, bool, error) {
	var name Name
	next, limit := -1, off
	for pos := off; ; {
		if pos >= len(msg) {
			return nil, 0, false, malformed("name at %d runs past the message", off)
		}
		l := int(msg[pos])
		switch l & 0xc0 {
		case 0xc0:
			if pos+1 >= len(msg) {
				return nil, 0, false, malformed("pointer at %d runs past the message", pos)
			}
			ptr := (l&0x3f)<<8 | int(msg[pos+1])
			if ptr >= limit {
				return nil, 0, false, malformed("pointer at %d to %d does not point before %d", pos, ptr, limit)
			}
			if next < 0 {
				next = pos + 2
			}
			pos, limit = ptr, ptr
			continue
		case 0x40, 0x80:
			return nil, 0, false, malformed("label type %#x at %d", l&0xc0, pos)
		}
		if pos+1+l > len(msg) {
			return nil, 0, false, malformed("label at %d runs past the message", pos)
		}
		if len(name)+1+l > maxName {
			return nil, 0, false, malformed("name at %d is longer than %d bytes", off, maxName)
		}
		name = append(name, msg[pos:pos+1+l]...)
		pos += 1 + l
		if l == 0 {
			if next < 0 {
				return name, pos, false, nil
			}
			return name, next, true, nil
		}
	}
}

// Labels is the number of labels, the root not counted.
func (n Name) Labels() int {
	c := 0
	for i := 0; i < len(n) && n[i] != 0; i += 1 + int(n[i]) {
		c++
	}
	return c
}

// Parent is the name without its first label; the root's parent is the
// root.
func (n Name) Parent() Name {
	if len(n) <= 1 {
		return n
	}
	return n[1+int(n[0]):]
}

// Key is the name with ASCII letters in lower case, as a string: names
// compare without regard to ASCII case, and only ASCII case (RFC 4343):
// other bytes, UTF-8 or not, are distinct names. (A length byte is at
// most 63, below 'A'.)
func (n Name) Key() string {
	b := make([]byte, len(n))
	for i, c := range n {
		b[i] = lowerASCII(c)
	}
	return string(b)
}

// Equal compares names as Key does.
func (n Name) Equal(o Name) bool {
	if len(n) != len(o) {
		return false
	}
	for i := range n {
		if lowerASCII(n[i]) != lowerASCII(o[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// String is the name in presentation format ("www.example.com."), with
// dots, backslashes and bytes outside printable ASCII escaped.
func (n Name) String() string {
	if len(n) <= 1 {
		return "."
	}
	var b strings.Builder
	for i := 0; i < len(n) && n[i] != 0; i += 1 + int(n[i]) {
		for _, c := range n[i+1 : i+1+int(n[i])] {
			switch {
			case c == '.' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c < '!' || c > '~':
				b.WriteByte('\\')
				b.WriteByte('0' + c/100)
				b.WriteByte('0' + c/10%10)
				b.WriteByte('0' + c%10)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('.')
	}
	return b.String()
}
