package rule

import (
	"bytes"
	"strconv"
)

// A condition's length range (Condition.MinLen, MaxLen): without one a
// condition is a prefix, and a request with more bytes after the pattern
// matches too; a DNS query with a byte after its question would get the
// answer its server refuses as malformed.

// HasLength reports whether c restricts the request's length.
func (c Condition) HasLength() bool { return c.MinLen != 0 || c.MaxLen != 0 }

// LengthAllows reports whether a request of n payload bytes is in c's
// length range.
func (c Condition) LengthAllows(n int) bool {
	return n >= int(c.MinLen) && (c.MaxLen == 0 || n <= int(c.MaxLen))
}

// ExactLength is c matching only requests of exactly n payload bytes.
func ExactLength(c Condition, n uint16) Condition {
	c.MinLen, c.MaxLen = n, n
	return c
}

// Overlaps reports whether c and d have the same offset and pattern and
// length ranges that share a length: one request could match both, and
// the data plane could answer it with only one of them. A service refuses
// such a pair, as it refuses identical conditions.
func (c Condition) Overlaps(d Condition) bool {
	if c.Offset != d.Offset || !bytes.Equal(c.Pattern, d.Pattern) {
		return false
	}
	lo := max(c.MinLen, d.MinLen)
	return (c.MaxLen == 0 || lo <= c.MaxLen) && (d.MaxLen == 0 || lo <= d.MaxLen)
}

// LengthText is c's length range as santactl writes it: "34" (exactly),
// "30-40", "30-" (no upper bound); empty without a range.
func (c Condition) LengthText() string {
	switch {
	case !c.HasLength():
		return ""
	case c.MinLen == c.MaxLen:
		return strconv.Itoa(int(c.MinLen))
	case c.MaxLen == 0:
		return strconv.Itoa(int(c.MinLen)) + "-"
	}
	return strconv.Itoa(int(c.MinLen)) + "-" + strconv.Itoa(int(c.MaxLen))
}

// validateLength refuses a range no request the data plane answers can be
// in: the rule would never answer, which is a mistake, not a rule.
func (c Condition) validateLength(l Limits) error {
	if int(c.MinLen) > l.MaxRequestLen {
		return never(tooBig("condition min length", "bytes", int(c.MinLen), l.MaxRequestLen), "the longest request the data plane answers")
	}
	if l.EndsRequest && int(c.MinLen) > c.End() {
		return never(tooBig("condition min length", "bytes", int(c.MinLen), c.End()),
			"the condition's end, where a TCP rule's request must end")
	}
	if c.MaxLen == 0 {
		return nil
	}
	if c.MaxLen < c.MinLen {
		return never(tooSmall("condition max length", "bytes", int(c.MaxLen), int(c.MinLen)), "the condition's min length")
	}
	if int(c.MaxLen) < c.End() {
		return never(tooSmall("condition max length", "bytes", int(c.MaxLen), c.End()), "the condition's end (offset + pattern length)")
	}
	return nil
}
