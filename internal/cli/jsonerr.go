package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// jsonError tells a decoding error of data for people who edit the file
// by hand: where a syntax error is, what a field wants.
func jsonError(data []byte, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line, col := position(data, syntax.Offset-1) // Offset is just past the bad byte
		return fmt.Errorf("line %d, column %d: %v", line, col, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" { // the whole file, or a whole rule
			return fmt.Errorf("want %s, not %s", kindName(typ.Type), typ.Value)
		}
		return fmt.Errorf("%s: want %s, not %s", typ.Field, kindName(typ.Type), typ.Value)
	case errors.Is(err, io.EOF):
		return errors.New("no JSON value")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the JSON value ends early")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

// kindName says what a field of the rule file takes.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return kindName(t.Elem())
	case reflect.Uint16:
		return "an integer from 0 to 65535"
	case reflect.Uint32:
		return "an integer from 0 to 4294967295"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}

// position is the line and column (both from 1) of the byte at offset.
func position(data []byte, offset int64) (line, col int) {
	before := data[:min(max(int(offset), 0), len(data))]
	return 1 + bytes.Count(before, []byte("\n")), len(before) - bytes.LastIndexByte(before, '\n')
}
