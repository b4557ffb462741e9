package protocol

import (
	"fmt"
	"strings"
	"syscall"
)

// A codec visits the fields of a body in wire order, reading or writing
// each through its pointer. The binary encoder and decoder implement it
// (and so does the JSON form of the test vectors), so that each message is
// written down once, in requests.go, replies.go and shared.go, with the
// field names of docs/protocol.md; the names also locate the field in
// error messages.
type codec interface {
	// version is the protocol version of the body: a structure that
	// changed between versions asks it.
	version() uint16
	u8(name string, v *uint8)
	u16(name string, v *uint16)
	u32(name string, v *uint32)
	u64(name string, v *uint64)
	// flag is a u8 that is 0 or 1.
	flag(name string, v *bool)
	// zero is a u8 that must be 0 (a rule's flags in version 1).
	zero(name string)
	// refuse refuses the body: field name holds what this version cannot
	// carry, or what it does not define.
	refuse(name, format string, args ...any)
	bytes16(name string, v *[]byte)
	// string16 holds UTF-8 text of at most max bytes.
	string16(name string, v *string, max int)
	addr(name string, v *[16]byte)
	// count is the number of items of the list name, an integer of width
	// bytes that must be at least min; each item takes at least itemSize
	// bytes. n is the count to write; the count read is returned.
	count(name string, width, min, itemSize, n int) int
	// elem visits item i of the list name with f. An item that is a single
	// field gives it the empty name.
	elem(list string, i int, f func(codec))
	// object visits a nested structure with f.
	object(name string, f func(codec))
	// variant is a kind byte, whose names are kinds (by value; "" for an
	// invalid kind), and a reserved zero byte; f visits the kind's fields.
	variant(kinds []string, kind *uint8, f func(codec))
}

// list visits a count and its items, which follow it at once.
func list[T any](c codec, name string, width, min, itemSize int, s *[]T, item func(codec, *T)) {
	each(c, name, s, c.count(name, width, min, itemSize, len(*s)), item)
}

// each visits the n items of a list, making room for them when decoding.
func each[T any](c codec, name string, s *[]T, n int, item func(codec, *T)) {
	if len(*s) != n {
		*s = make([]T, n)
	}
	for i := range *s {
		c.elem(name, i, func(c codec) { item(c, &(*s)[i]) })
	}
}

// u32s is a list of u32 with a u32 count.
func u32s(c codec, name string, s *[]uint32) {
	list(c, name, 4, 0, 4, s, func(c codec, v *uint32) { c.u32("", v) })
}

// cursor is where the binary encoder or decoder is in a body, so that an
// error names its field and the batch item it belongs to.
type cursor struct {
	v     uint16 // the body's protocol version
	path  []step
	index uint32 // item of the outermost list being visited, or NoIndex
	err   *Error // the first error
}

type step struct {
	name string
	i    int // item of a list, or -1
}

func (c *cursor) version() uint16 { return c.v }

func (c *cursor) refuse(name, format string, args ...any) {
	c.fail(syscall.EINVAL, name, format, args...)
}

// within runs f inside field name (item i of it, if i >= 0).
func (c *cursor) within(name string, i int, f func()) {
	if i >= 0 && len(c.path) == 0 {
		c.index = uint32(i)
		defer func() { c.index = NoIndex }()
	}
	c.path = append(c.path, step{name, i})
	f()
	c.path = c.path[:len(c.path)-1]
}

// fail records the first error, prefixed with the path to field.
func (c *cursor) fail(code syscall.Errno, field, format string, args ...any) {
	if c.err != nil {
		return
	}
	var where strings.Builder
	for _, s := range c.path {
		where.WriteString(s.name)
		if s.i >= 0 {
			fmt.Fprintf(&where, "[%d]", s.i)
		}
		where.WriteByte('.')
	}
	where.WriteString(field)
	c.err = ErrorAt(code, c.index, "%s: %s", strings.TrimSuffix(where.String(), "."), fmt.Sprintf(format, args...))
}

// knownKind reports whether kinds names kind.
func knownKind(kinds []string, kind uint8) bool {
	return int(kind) < len(kinds) && kinds[kind] != ""
}

// maxCount is the largest count an integer of width bytes holds.
func maxCount(width int) uint64 { return 1<<(8*width) - 1 }

// maxLen16 is the longest bytes16 or string16.
const maxLen16 = 0xffff
