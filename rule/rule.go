package rule

import (
	"bytes"
	"fmt"
)

// Condition matches a request whose payload holds Pattern at Offset,
// payload[Offset:Offset+len(Pattern)] == Pattern, and whose length is in
// the condition's range (length.go).
type Condition struct {
	Offset  uint16
	Pattern []byte
	// The request's payload length L must satisfy MinLen <= L, and
	// L <= MaxLen unless MaxLen is 0 (no upper bound). Exact length n:
	// MinLen = MaxLen = n (ExactLength). Both 0: any length, and the
	// condition is a prefix of the request.
	MinLen, MaxLen uint16
}

// End is the payload length a request needs before the condition can match.
func (c Condition) End() int { return int(c.Offset) + len(c.Pattern) }

// Matches reports whether payload holds the pattern at the offset and has
// a length the condition allows.
func (c Condition) Matches(payload []byte) bool {
	return c.LengthAllows(len(payload)) && c.End() <= len(payload) && bytes.Equal(payload[c.Offset:c.End()], c.Pattern)
}

// ProcessorKind says what a processor writes into the reply.
type ProcessorKind uint8

// The zero kind is invalid so that a forgotten Kind fails validation instead
// of silently becoming a put.
const (
	ProcessorPut  ProcessorKind = iota + 1 // write fixed bytes
	ProcessorCopy                          // copy bytes of the request
)

func (k ProcessorKind) String() string {
	switch k {
	case ProcessorPut:
		return "put"
	case ProcessorCopy:
		return "copy"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Processor writes one range of the reply. Processors apply in order, so a
// later one overwrites the bytes of an earlier one.
type Processor struct {
	Kind      ProcessorKind
	DstOffset uint16 // first reply byte written
	Bytes     []byte // put: the bytes written
	SrcOffset uint16 // copy: first request payload byte read
	Length    uint16 // copy: bytes moved
}

// Put writes b at reply offset dst.
func Put(dst uint16, b []byte) Processor {
	return Processor{Kind: ProcessorPut, DstOffset: dst, Bytes: bytes.Clone(b)}
}

// Copy moves request payload bytes [src, src+length) to reply offset dst.
func Copy(src, length, dst uint16) Processor {
	return Processor{Kind: ProcessorCopy, DstOffset: dst, SrcOffset: src, Length: length}
}

// span is the number of reply bytes the processor writes.
func (p Processor) span() int {
	if p.Kind == ProcessorPut {
		return len(p.Bytes)
	}
	return int(p.Length)
}

// Rule answers requests matching Condition with a ReplyLen-byte reply that
// starts as zeros and is written by Processors in order.
type Rule struct {
	Condition  Condition
	Processors []Processor
	ReplyLen   uint16
}

// Validate checks every limit in l and returns a *LimitError naming the
// field, its value and the limit it breaks (or a plain error for an unknown
// processor kind).
func (r Rule) Validate(l Limits) error {
	c := r.Condition
	if len(c.Pattern) == 0 {
		return tooSmall("condition pattern", "bytes", 0, 1)
	}
	if len(c.Pattern) > l.MaxCondLen {
		return tooBig("condition pattern", "bytes", len(c.Pattern), l.MaxCondLen)
	}
	if c.End() > l.MaxCondEnd {
		return tooBig("condition end (offset + pattern length)", "", c.End(), l.MaxCondEnd)
	}
	if err := c.validateLength(l); err != nil {
		return err
	}
	if r.ReplyLen == 0 {
		return tooSmall("reply length", "bytes", 0, 1)
	}
	if int(r.ReplyLen) > l.MaxReplyLen {
		return tooBig("reply length", "bytes", int(r.ReplyLen), l.MaxReplyLen)
	}
	if len(r.Processors) > l.MaxProcessors {
		return tooBig("processor count", "", len(r.Processors), l.MaxProcessors)
	}
	for i, p := range r.Processors {
		if err := p.validate(i, int(r.ReplyLen), int(c.MaxLen), l); err != nil {
			return err
		}
	}
	return nil
}

// validate checks one processor; maxLen is the condition's upper bound on
// the request's length (0: none), which a copy must read within.
func (p Processor) validate(i, replyLen, maxLen int, l Limits) error {
	// Named only on error: a million-rule batch validates every processor.
	name := func(field string) string { return fmt.Sprintf("processors[%d] (%s)%s", i, p.Kind, field) }
	switch p.Kind {
	case ProcessorPut:
		if len(p.Bytes) == 0 {
			return tooSmall(name(""), "bytes", 0, 1)
		}
	case ProcessorCopy:
		if p.Length == 0 {
			return tooSmall(name(" length"), "bytes", 0, 1)
		}
		if int(p.Length) > l.MaxCopyLen {
			return tooBig(name(" length"), "bytes", int(p.Length), l.MaxCopyLen)
		}
		if end := int(p.SrcOffset) + int(p.Length); end > l.MaxCondEnd {
			return tooBig(name(" source end (src + length)"), "", end, l.MaxCondEnd)
		}
		if end := int(p.SrcOffset) + int(p.Length); maxLen != 0 && end > maxLen {
			return never(tooBig(name(" source end (src + length)"), "", end, maxLen), "the condition's max length")
		}
	default:
		return fmt.Errorf("processors[%d] has unknown kind %d", i, uint8(p.Kind))
	}
	if end := int(p.DstOffset) + p.span(); end > replyLen {
		e := tooBig(name(" end (dst + length)"), "", end, replyLen)
		e.LimitName = "the reply length"
		return e
	}
	return nil
}
