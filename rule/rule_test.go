package rule

import (
	"bytes"
	"errors"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := Rule{
		Condition:  Condition{Offset: 4, Pattern: []byte("get k\r\n")},
		Processors: []Processor{Put(0, []byte("VALUE ")), Copy(4, 3, 6)},
		ReplyLen:   16,
	}
	if err := ok.Validate(DefaultUDPLimits); err != nil {
		t.Fatalf("valid rule: %v", err)
	}

	with := func(f func(r *Rule)) Rule {
		r := ok
		r.Processors = append([]Processor(nil), ok.Processors...)
		f(&r)
		return r
	}
	tests := []struct {
		name  string
		rule  Rule
		field string
		value int
		limit int
		msg   string
	}{
		{"empty pattern", with(func(r *Rule) { r.Condition.Pattern = nil }),
			"condition pattern", 0, 1, "condition pattern is 0 bytes; it must be at least 1"},
		{"long pattern", with(func(r *Rule) { r.Condition.Pattern = make([]byte, 300) }),
			"condition pattern", 300, 256, "condition pattern is 300 bytes; the limit is 256"},
		{"condition end", with(func(r *Rule) { r.Condition.Offset = 1020 }),
			"condition end (offset + pattern length)", 1027, 1024,
			"condition end (offset + pattern length) is 1027; the limit is 1024"},
		{"reply length 0", with(func(r *Rule) { r.ReplyLen = 0; r.Processors = nil }),
			"reply length", 0, 1, "reply length is 0 bytes; it must be at least 1"},
		{"reply too long", with(func(r *Rule) { r.ReplyLen = 1473 }),
			"reply length", 1473, 1472, "reply length is 1473 bytes; the limit is 1472"},
		{"too many processors", with(func(r *Rule) {
			for range 7 {
				r.Processors = append(r.Processors, Put(0, []byte("x")))
			}
		}), "processor count", 9, 8, "processor count is 9; the limit is 8"},
		{"put outside reply", with(func(r *Rule) { r.Processors[0] = Put(12, []byte("VALUE ")) }),
			"processors[0] (put) end (dst + length)", 18, 16,
			"processors[0] (put) end (dst + length) is 18; the limit is 16 (the reply length)"},
		{"empty put", with(func(r *Rule) { r.Processors[0] = Put(0, nil) }),
			"processors[0] (put)", 0, 1, "processors[0] (put) is 0 bytes; it must be at least 1"},
		{"copy length 0", with(func(r *Rule) { r.Processors[1] = Copy(4, 0, 6) }),
			"processors[1] (copy) length", 0, 1, "processors[1] (copy) length is 0 bytes; it must be at least 1"},
		{"copy too long", with(func(r *Rule) { r.ReplyLen = 1000; r.Processors[1] = Copy(4, 257, 6) }),
			"processors[1] (copy) length", 257, 256, "processors[1] (copy) length is 257 bytes; the limit is 256"},
		{"copy source end", with(func(r *Rule) { r.Processors[1] = Copy(1022, 3, 6) }),
			"processors[1] (copy) source end (src + length)", 1025, 1024,
			"processors[1] (copy) source end (src + length) is 1025; the limit is 1024"},
		{"min length above any request", with(func(r *Rule) { r.Condition.MinLen = 1473 }),
			"condition min length", 1473, 1472,
			"condition min length is 1473 bytes; the limit is 1472 (the longest request the data plane answers): the rule could never answer a request"},
		{"max length below min length", with(func(r *Rule) { r.Condition.MinLen, r.Condition.MaxLen = 40, 30 }),
			"condition max length", 30, 40,
			"condition max length is 30 bytes; it must be at least 40 (the condition's min length): the rule could never answer a request"},
		{"max length below the condition's end", with(func(r *Rule) { r.Condition.MaxLen = 10 }),
			"condition max length", 10, 11,
			"condition max length is 10 bytes; it must be at least 11 (the condition's end (offset + pattern length)): the rule could never answer a request"},
		{"copy source beyond max length", with(func(r *Rule) { r.Condition.MaxLen = 11; r.Processors[1] = Copy(10, 3, 6) }),
			"processors[1] (copy) source end (src + length)", 13, 11,
			"processors[1] (copy) source end (src + length) is 13; the limit is 11 (the condition's max length): the rule could never answer a request"},
		{"copy outside reply", with(func(r *Rule) { r.Processors[1] = Copy(4, 3, 14) }),
			"processors[1] (copy) end (dst + length)", 17, 16,
			"processors[1] (copy) end (dst + length) is 17; the limit is 16 (the reply length)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rule.Validate(DefaultUDPLimits)
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("Validate = %v; want a *LimitError", err)
			}
			if le.Field != tt.field || le.Value != tt.value || le.Limit != tt.limit {
				t.Errorf("got field %q value %d limit %d; want %q %d %d", le.Field, le.Value, le.Limit, tt.field, tt.value, tt.limit)
			}
			if err.Error() != tt.msg {
				t.Errorf("message %q; want %q", err, tt.msg)
			}
		})
	}
}

// Length ranges a request can be in are valid, up to the longest request
// the data plane answers, and with no upper bound.
func TestValidateLengths(t *testing.T) {
	base := Rule{Condition: Condition{Offset: 2, Pattern: []byte("abc")}, Processors: []Processor{Copy(0, 2, 0)}, ReplyLen: 2}
	for _, c := range []struct{ min, max uint16 }{{5, 5}, {0, 5}, {5, 0}, {1, 0}, {1472, 0}, {1472, 1472}, {5, 65535}} {
		r := base
		r.Condition.MinLen, r.Condition.MaxLen = c.min, c.max
		if err := r.Validate(DefaultUDPLimits); err != nil {
			t.Errorf("length %d-%d: %v", c.min, c.max, err)
		}
		if _, err := Compile(r); err != nil {
			t.Errorf("length %d-%d: Compile: %v", c.min, c.max, err)
		}
	}
	// Over TCP a rule answers only a segment its condition ends: a range
	// must allow that length.
	r := base
	r.Condition.MinLen = 6
	err := r.Validate(DefaultTCPLimits)
	if want := "condition min length is 6 bytes; the limit is 5 (the condition's end, where a TCP rule's request must end): the rule could never answer a request"; err == nil || err.Error() != want {
		t.Errorf("TCP, min length above the condition's end: %v; want %q", err, want)
	}
	if err := r.Validate(DefaultUDPLimits); err != nil {
		t.Errorf("UDP, min length above the condition's end: %v", err)
	}
	r.Condition.MinLen, r.Condition.MaxLen = 5, 5
	if err := r.Validate(DefaultTCPLimits); err != nil {
		t.Errorf("TCP, exactly the condition's end: %v", err)
	}
	r.Condition.MinLen, r.Condition.MaxLen = 1473, 0
	if _, err := Compile(r); err == nil {
		t.Error("Compile takes a min length above any request")
	}
}

func TestValidateStricterLimits(t *testing.T) {
	l := DefaultUDPLimits
	l.MaxCondLen = 8
	r := Rule{Condition: Condition{Pattern: []byte("123456789")}, ReplyLen: 1}
	var le *LimitError
	if err := r.Validate(l); !errors.As(err, &le) || le.Limit != 8 {
		t.Fatalf("Validate = %v; want the caller's limit of 8", err)
	}
}

func TestValidateUnknownKind(t *testing.T) {
	r := Rule{Condition: Condition{Pattern: []byte("x")}, ReplyLen: 4, Processors: []Processor{{DstOffset: 1}}}
	err := r.Validate(DefaultUDPLimits)
	if err == nil || err.Error() != "processors[0] has unknown kind 0" {
		t.Fatalf("Validate = %v; want an unknown kind error", err)
	}
}

func TestPutCopiesItsBytes(t *testing.T) {
	b := []byte("abc")
	p := Put(0, b)
	b[0] = 'x'
	if !bytes.Equal(p.Bytes, []byte("abc")) {
		t.Fatalf("Put shares the caller's slice: %q", p.Bytes)
	}
}

func TestConditionMatches(t *testing.T) {
	c := Condition{Offset: 2, Pattern: []byte("cd")}
	for _, tt := range []struct {
		payload string
		want    bool
	}{{"abcd", true}, {"abcde", true}, {"abc", false}, {"abce", false}, {"", false}} {
		if got := c.Matches([]byte(tt.payload)); got != tt.want {
			t.Errorf("Matches(%q) = %v; want %v", tt.payload, got, tt.want)
		}
	}
}

// A length range: a request one byte longer or shorter than it allows does
// not match, whatever its bytes.
func TestConditionMatchesLength(t *testing.T) {
	prefix := Condition{Offset: 2, Pattern: []byte("cd")}
	for _, tt := range []struct {
		cond    Condition
		payload string
		want    bool
	}{
		{ExactLength(prefix, 4), "abcd", true},
		{ExactLength(prefix, 4), "abcde", false},
		{ExactLength(prefix, 5), "abcd", false},
		{ExactLength(prefix, 5), "abcde", true},
		{ExactLength(prefix, 5), "abcdef", false},
		{Condition{Offset: 2, Pattern: []byte("cd"), MinLen: 5, MaxLen: 6}, "abcd", false},
		{Condition{Offset: 2, Pattern: []byte("cd"), MinLen: 5, MaxLen: 6}, "abcdef", true},
		{Condition{Offset: 2, Pattern: []byte("cd"), MinLen: 5, MaxLen: 6}, "abcdefg", false},
		{Condition{Offset: 2, Pattern: []byte("cd"), MinLen: 5}, "abcd" + string(make([]byte, 2000)), true},
		{Condition{Offset: 2, Pattern: []byte("cd"), MaxLen: 5}, "abcde", true},
		{Condition{Offset: 2, Pattern: []byte("cd"), MaxLen: 5}, "abcdef", false},
		{ExactLength(prefix, 4), "abce", false},
	} {
		if got := tt.cond.Matches([]byte(tt.payload)); got != tt.want {
			t.Errorf("%+v Matches(%d bytes %.6q) = %v; want %v", tt.cond, len(tt.payload), tt.payload, got, tt.want)
		}
	}
}

func TestConditionOverlaps(t *testing.T) {
	c := func(off uint16, p string, min, max uint16) Condition {
		return Condition{Offset: off, Pattern: []byte(p), MinLen: min, MaxLen: max}
	}
	for _, tt := range []struct {
		a, b Condition
		want bool
	}{
		{c(0, "ab", 0, 0), c(0, "ab", 0, 0), true},
		{c(0, "ab", 0, 0), c(0, "ab", 10, 10), true}, // no range: every length
		{c(0, "ab", 10, 10), c(0, "ab", 10, 10), true},
		{c(0, "ab", 10, 10), c(0, "ab", 11, 11), false},
		{c(0, "ab", 10, 20), c(0, "ab", 20, 0), true},
		{c(0, "ab", 10, 20), c(0, "ab", 21, 0), false},
		{c(0, "ab", 0, 20), c(0, "ab", 21, 30), false},
		{c(0, "ab", 5, 0), c(0, "ab", 30, 0), true},
		{c(0, "ab", 10, 10), c(1, "ab", 10, 10), false},  // another offset
		{c(0, "ab", 10, 10), c(0, "abc", 10, 10), false}, // another pattern: the longer one is more specific
	} {
		if got, back := tt.a.Overlaps(tt.b), tt.b.Overlaps(tt.a); got != tt.want || back != tt.want {
			t.Errorf("%+v and %+v overlap: %v, %v; want %v", tt.a, tt.b, got, back, tt.want)
		}
	}
}

func TestLengthText(t *testing.T) {
	p := Condition{Pattern: []byte("x")}
	for _, tt := range []struct {
		c    Condition
		want string
	}{
		{p, ""},
		{ExactLength(p, 34), "34"},
		{Condition{Pattern: []byte("x"), MinLen: 30, MaxLen: 40}, "30-40"},
		{Condition{Pattern: []byte("x"), MinLen: 30}, "30-"},
		{Condition{Pattern: []byte("x"), MaxLen: 40}, "0-40"},
	} {
		if got := tt.c.LengthText(); got != tt.want {
			t.Errorf("%+v: LengthText %q; want %q", tt.c, got, tt.want)
		}
	}
}
