package protocol

import "github.com/santa-offload/santa/rule"

// sizer is a codec that counts the bytes a body takes on the wire without
// writing them: the daemon fills a page up to one message from it, and so
// never writes a size of its own that could drift from the encoding.
type sizer struct {
	v uint16 // the protocol version counted
	n int
}

func (s *sizer) version() uint16                     { return s.v }
func (s *sizer) refuse(string, string, ...any)       {}
func (s *sizer) u8(string, *uint8)                   { s.n++ }
func (s *sizer) u16(string, *uint16)                 { s.n += 2 }
func (s *sizer) u32(string, *uint32)                 { s.n += 4 }
func (s *sizer) u64(string, *uint64)                 { s.n += 8 }
func (s *sizer) flag(string, *bool)                  { s.n++ }
func (s *sizer) zero(string)                         { s.n++ }
func (s *sizer) bytes16(_ string, v *[]byte)         { s.n += 2 + len(*v) }
func (s *sizer) string16(_ string, v *string, _ int) { s.n += 2 + len(*v) }
func (s *sizer) addr(string, *[16]byte)              { s.n += 16 }
func (s *sizer) count(_ string, width, _, _, n int) int {
	s.n += width
	return n
}
func (s *sizer) elem(_ string, _ int, f func(codec)) { f(s) }
func (s *sizer) object(_ string, f func(codec))      { f(s) }
func (s *sizer) variant(_ []string, _ *uint8, f func(codec)) {
	s.n += 2 // kind, reserved
	f(s)
}

// RuleSize is what r, without a guard, takes in a batch of version v.
func RuleSize(v uint16, r *rule.Rule) int {
	s := sizer{v: v}
	var g *Guard
	ruleFields(&s, r, &g)
	return s.n
}

// RuleEntrySize is what e takes in a LIST_RULES page of version v.
func RuleEntrySize(v uint16, e *RuleEntry) int {
	s := sizer{v: v}
	ruleEntryFields(&s, e)
	return s.n
}

// ServiceInfoSize is what s takes in a LIST_SERVICES reply of version v.
func ServiceInfoSize(v uint16, s *ServiceInfo) int {
	sz := sizer{v: v}
	s.fields(&sz)
	return sz.n
}

// Fixed sizes of the items of pages (docs/protocol.md).
const (
	// MinServiceInfoSize is what an item of LIST_SERVICES takes in version
	// 1, and in later versions without a manager's name.
	MinServiceInfoSize = serviceSize
	// MaxServiceInfoSize is the most an item of LIST_SERVICES takes from
	// version 2 on, with its manager's name.
	MaxServiceInfoSize = serviceSize + 2 + MaxClientName
	RuleCountersSize   = countersSize // an item of RULE_STATS
	// PageOverhead is what a paged reply takes besides its items: the
	// header, the count and next.
	PageOverhead = HeaderLen + 4 + 4
)

// ListServicesOverhead is what a LIST_SERVICES reply of version v takes
// besides its services: the header, the count, and (version 7) next.
func ListServicesOverhead(v uint16) int {
	if v >= Version7 {
		return PageOverhead
	}
	return HeaderLen + 4
}
