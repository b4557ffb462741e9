// Package jsonfile decodes configuration files: one JSON value, whose
// unknown keys are refused, and nothing after it but white space.
package jsonfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Decode decodes data, the whole of a file, into v. Unknown keys are
// refused: a misspelt key must not silently do nothing. So is anything
// after the value but white space: a second object pasted in, a stray
// brace or a line of text would otherwise be ignored without a word.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	end := int(dec.InputOffset())
	rest := bytes.TrimLeft(data[end:], " \t\r\n") // JSON's white space
	if len(rest) == 0 {
		return nil
	}
	at := len(data) - len(rest)
	line, col := position(data, at)
	return fmt.Errorf("line %d, column %d: more after the end of the JSON value: %s (a configuration file is one JSON object: "+
		"merge or remove what follows it)", line, col, excerpt(rest))
}

// position is the line and column (both from 1) of the byte at offset.
func position(data []byte, offset int) (line, col int) {
	before := data[:offset]
	return 1 + bytes.Count(before, []byte("\n")), offset - bytes.LastIndexByte(before, '\n')
}

// excerptMax is how many bytes of what follows the value an error shows.
const excerptMax = 40

// excerpt is the start of b, up to its first line's end, quoted for an
// error message.
func excerpt(b []byte) string {
	more := false
	if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
		b, more = b[:i], true
	}
	if len(b) > excerptMax {
		n := excerptMax
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		b, more = b[:n], true
	}
	if more {
		return strconv.Quote(string(b)) + "..."
	}
	return strconv.Quote(string(b))
}
