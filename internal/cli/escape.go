package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// quote is b as quoted text: printable ASCII as it is, the rest as \xHH
// (\n, \r, \t, \" and \\ as in Go). Patterns are bytes, not text, so
// every other byte, UTF-8 or not, is shown by value.
func quote(b []byte) string { return quoteUpTo(b, math.MaxInt) }

// quoteUpTo is quote cut to at most max characters of escaped bytes; a
// cut string is followed by its length ("\x00\x01"... (300 bytes)).
func quoteUpTo(b []byte, max int) string {
	var s strings.Builder
	s.WriteByte('"')
	for _, c := range b {
		e := escapeByte(c)
		if s.Len()-1+len(e) > max {
			s.WriteByte('"')
			fmt.Fprintf(&s, "... (%d bytes)", len(b))
			return s.String()
		}
		s.WriteString(e)
	}
	s.WriteByte('"')
	return s.String()
}

func escapeByte(c byte) string {
	switch c {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if c < ' ' || c > '~' {
		return fmt.Sprintf(`\x%02x`, c)
	}
	return string(c)
}

// shownName is a name another user chose (a client's HELLO name) as it
// is if it is printable text, else quoted as Go does: a newline would
// forge a row of a table, an ESC start a terminal's escape sequence.
func shownName(s string) string {
	if isText([]byte(s)) {
		return s
	}
	return strconv.Quote(s)
}
