package protocol

import (
	"syscall"
	"unicode/utf8"
)

// encoder appends a body to a message. It refuses what the decoder would
// refuse, so that a bad request fails before it is sent, with the error the
// daemon would give.
type encoder struct {
	cursor
	b []byte
}

func (e *encoder) u8(_ string, v *uint8)   { e.b = append(e.b, *v) }
func (e *encoder) u16(_ string, v *uint16) { e.b = le.AppendUint16(e.b, *v) }
func (e *encoder) u32(_ string, v *uint32) { e.b = le.AppendUint32(e.b, *v) }
func (e *encoder) u64(_ string, v *uint64) { e.b = le.AppendUint64(e.b, *v) }
func (e *encoder) zero(string)             { e.b = append(e.b, 0) }
func (e *encoder) addr(_ string, v *[16]byte) {
	e.b = append(e.b, v[:]...)
}

func (e *encoder) flag(_ string, v *bool) {
	if *v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) bytes16(name string, v *[]byte) {
	if len(*v) > maxLen16 {
		e.fail(syscall.EINVAL, name, "is %d bytes; the limit is %d", len(*v), maxLen16)
	}
	e.b = le.AppendUint16(e.b, uint16(len(*v)))
	e.b = append(e.b, *v...)
}

func (e *encoder) string16(name string, v *string, max int) {
	if len(*v) > max {
		e.fail(syscall.EINVAL, name, "is %d bytes; the limit is %d", len(*v), max)
	}
	if !utf8.ValidString(*v) {
		e.fail(syscall.EINVAL, name, "is not UTF-8")
	}
	e.b = le.AppendUint16(e.b, uint16(len(*v)))
	e.b = append(e.b, *v...)
}

func (e *encoder) count(name string, width, min, _, n int) int {
	if n < min {
		e.fail(syscall.EINVAL, name, "has %d items; it needs at least %d", n, min)
	}
	if uint64(n) > maxCount(width) {
		e.fail(syscall.EINVAL, name, "has %d items; the limit is %d", n, maxCount(width))
	}
	for i := range width {
		e.b = append(e.b, byte(n>>(8*i)))
	}
	return n
}

func (e *encoder) elem(list string, i int, f func(codec)) { e.within(list, i, func() { f(e) }) }
func (e *encoder) object(name string, f func(codec))      { e.within(name, -1, func() { f(e) }) }

func (e *encoder) variant(kinds []string, kind *uint8, f func(codec)) {
	if !knownKind(kinds, *kind) {
		e.fail(syscall.EINVAL, "kind", "unknown kind %d", *kind)
	}
	e.b = append(e.b, *kind, 0)
	f(e)
}
