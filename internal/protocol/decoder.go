package protocol

import (
	"bytes"
	"syscall"
	"unicode/utf8"
)

// decoder reads a body. After the first error every read yields zeros and
// every count 0, so a body's fields function runs to its end without
// allocating anything more.
type decoder struct {
	cursor
	b []byte // the bytes not read yet
}

// take consumes the next n bytes of field name; ok is false if the body
// ends first.
func (d *decoder) take(name string, n int) (p []byte, ok bool) {
	if d.err != nil {
		return nil, false
	}
	if len(d.b) < n {
		d.fail(syscall.EBADMSG, name, "the body ends %d bytes into this %d-byte field", len(d.b), n)
		return nil, false
	}
	p, d.b = d.b[:n], d.b[n:]
	return p, true
}

func (d *decoder) u8(name string, v *uint8) {
	if p, ok := d.take(name, 1); ok {
		*v = p[0]
	}
}

func (d *decoder) u16(name string, v *uint16) {
	if p, ok := d.take(name, 2); ok {
		*v = le.Uint16(p)
	}
}

func (d *decoder) u32(name string, v *uint32) {
	if p, ok := d.take(name, 4); ok {
		*v = le.Uint32(p)
	}
}

func (d *decoder) u64(name string, v *uint64) {
	if p, ok := d.take(name, 8); ok {
		*v = le.Uint64(p)
	}
}

func (d *decoder) flag(name string, v *bool) {
	var b uint8
	d.u8(name, &b)
	if b > 1 {
		d.fail(syscall.EINVAL, name, "is %d; it must be 0 or 1", b)
	}
	*v = b == 1
}

func (d *decoder) zero(name string) {
	var b uint8
	d.u8(name, &b)
	if b != 0 {
		d.fail(syscall.EINVAL, name, "is %d; it must be 0", b)
	}
}

func (d *decoder) bytes16(name string, v *[]byte) {
	var n uint16
	d.u16(name, &n)
	if p, ok := d.take(name, int(n)); ok {
		*v = bytes.Clone(p)
	}
}

func (d *decoder) string16(name string, v *string, max int) {
	var n uint16
	d.u16(name, &n)
	p, ok := d.take(name, int(n))
	switch {
	case !ok:
	case len(p) > max:
		d.fail(syscall.EINVAL, name, "is %d bytes; the limit is %d", len(p), max)
	case !utf8.Valid(p):
		d.fail(syscall.EINVAL, name, "is not UTF-8")
	default:
		*v = string(p)
	}
}

func (d *decoder) addr(name string, v *[16]byte) {
	if p, ok := d.take(name, len(v)); ok {
		copy(v[:], p)
	}
}

// count checks the count against the bytes left before anyone allocates
// room for the items.
func (d *decoder) count(name string, width, min, itemSize, _ int) int {
	p, ok := d.take(name, width)
	if !ok {
		return 0
	}
	var n uint64 // wide enough for count × itemSize
	for i := range width {
		n |= uint64(p[i]) << (8 * i)
	}
	switch {
	case n < uint64(min):
		d.fail(syscall.EINVAL, name, "has %d items; it needs at least %d", n, min)
	case n*uint64(itemSize) > uint64(len(d.b)):
		d.fail(syscall.EBADMSG, name, "count %d needs at least %d bytes; the body has %d left", n, n*uint64(itemSize), len(d.b))
	default:
		return int(n)
	}
	return 0
}

func (d *decoder) elem(list string, i int, f func(codec)) { d.within(list, i, func() { f(d) }) }
func (d *decoder) object(name string, f func(codec))      { d.within(name, -1, func() { f(d) }) }

func (d *decoder) variant(kinds []string, kind *uint8, f func(codec)) {
	d.u8("kind", kind)
	d.zero("reserved")
	if d.err == nil && !knownKind(kinds, *kind) {
		d.fail(syscall.EINVAL, "kind", "unknown kind %d", *kind)
	}
	f(d)
}
