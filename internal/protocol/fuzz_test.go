package protocol

import (
	"bytes"
	"testing"
)

// FuzzDecode checks that Decode never panics, and that what it accepts
// encodes back to the same bytes: the wire form of a body is unique.
func FuzzDecode(f *testing.F) {
	for _, v := range goVectors {
		f.Add(mustEncode(v.version, v.seq, v.body))
	}
	for _, m := range v2Messages {
		f.Add(mustEncode(Version2, 1, m.body))
	}
	for _, v := range goInvalid() {
		f.Add(v.msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, body, err := Decode(msg)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Decode error %v is a %T, not a *Error", err, err)
			}
			return
		}
		again, err := Encode(h.Version, h.Seq, body)
		if err != nil {
			t.Fatalf("decoded %v does not encode: %v", h.Type, err)
		}
		if !bytes.Equal(again, msg) {
			t.Fatalf("decoded %v encodes to\n%x\nnot\n%x", h.Type, again, msg)
		}
	})
}
