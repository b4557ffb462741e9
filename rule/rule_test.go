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
