package cli

import (
	"fmt"
	"io"
	"strings"
)

const hexdumpWidth = 16 // bytes per line

// hexdump writes b as hexdump -C does, each line after indent: the offset,
// 16 bytes in hex and the same bytes as ASCII. The bytes that copied marks
// are shown as "--" and "-": in a reply template, the bytes every reply
// takes from its request. copied may be nil.
func hexdump(w io.Writer, indent string, b []byte, copied []bool) {
	for line := 0; line < len(b); line += hexdumpWidth {
		var hex, text strings.Builder
		for i := line; i < line+hexdumpWidth; i++ {
			if i == line+hexdumpWidth/2 {
				hex.WriteByte(' ')
			}
			switch {
			case i >= len(b):
				hex.WriteString("   ")
			case copied != nil && copied[i]:
				hex.WriteString("-- ")
				text.WriteByte('-')
			default:
				fmt.Fprintf(&hex, "%02x ", b[i])
				text.WriteByte(printable(b[i]))
			}
		}
		fmt.Fprintf(w, "%s%04x  %s |%s|\n", indent, line, hex.String(), text.String())
	}
}

func printable(c byte) byte {
	if c < ' ' || c > '~' {
		return '.'
	}
	return c
}
