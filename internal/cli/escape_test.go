package cli

import (
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	tests := []struct {
		in    string
		width int
		want  string
	}{
		{"Hello", 40, `"Hello"`},
		{"", 40, `""`},
		{"a\"b\\c\n\r\t", 40, `"a\"b\\c\n\r\t"`},
		{"\x00\x7f\x80\xff ~", 40, `"\x00\x7f\x80\xff ~"`},
		{"é", 40, `"\xc3\xa9"`},
		{"abcdef", 6, `"abcdef"`},
		{"abcdefg", 6, `"abcdef"... (7 bytes)`},
		{"ab\x00cd", 5, `"ab"... (5 bytes)`}, // an escape is never cut
	}
	for _, tt := range tests {
		if got := quoteUpTo([]byte(tt.in), tt.width); got != tt.want {
			t.Errorf("quoteUpTo(%q, %d) = %s, want %s", tt.in, tt.width, got, tt.want)
		}
	}
}

func TestHexdump(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		copied []int
		want   string
	}{
		{"empty", "", nil, ""},
		{"short", "Hello", nil,
			"> 0000  48 65 6c 6c 6f                                    |Hello|\n"},
		{"two lines", "0123456789abcdef\x00\x01\xff", nil,
			"> 0000  30 31 32 33 34 35 36 37  38 39 61 62 63 64 65 66  |0123456789abcdef|\n" +
				"> 0010  00 01 ff                                          |...|\n"},
		{"copied bytes", "\x00\x00Hi\x00", []int{0, 1, 4}, "> 0000  -- -- 48 69 --                                    |--Hi-|\n"},
	}
	for _, tt := range tests {
		var copied []bool
		if tt.copied != nil {
			copied = make([]bool, len(tt.in))
			for _, i := range tt.copied {
				copied[i] = true
			}
		}
		var b strings.Builder
		hexdump(&b, "> ", []byte(tt.in), copied)
		check(t, tt.name, b.String(), tt.want)
	}
}
