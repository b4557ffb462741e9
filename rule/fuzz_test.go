package rule

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzValidate builds rules from fuzz bytes. Validate must not panic, and a
// rule it accepts must compile (unless its copies are cut into too many
// pieces) to a reply equal to applying the processors one by one.
func FuzzValidate(f *testing.F) {
	f.Add([]byte{0, 0, 5, 0, 'H', 'e', 'l', 'l', 'o', 6, 0, 1, 1, 0, 0, 6, 'C', 'O', 'M', 'S', 'Y', 'S'})
	f.Add([]byte{2, 0, 4, 0, 1, 2, 3, 4, 16, 0, 3, 1, 2, 0, 4, 'a', 'b', 'c', 'd', 2, 0, 0, 0, 0, 2, 0, 2, 4, 0, 1, 0, 8, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := fuzzRule(data)
		if r.Validate(DefaultUDPLimits) != nil {
			return
		}
		c, err := Compile(r)
		if err != nil {
			var le *LimitError
			if !errors.As(err, &le) || len(r.Processors) < 2 {
				t.Fatalf("valid rule %+v does not compile: %v", r, err)
			}
			return
		}
		payload := make([]byte, MaxCondEnd)
		for i := range payload {
			payload[i] = byte(i*7 + 1)
		}
		got, ok := c.Reply(payload)
		if want := applyInOrder(r, payload); !ok || !bytes.Equal(got, want) {
			t.Fatalf("rule %+v: compiled reply\n%x (%v)\nprocessors in order give\n%x", r, got, ok, want)
		}
	})
}

// applyInOrder builds the reply the slow way the processors define it.
func applyInOrder(r Rule, payload []byte) []byte {
	reply := make([]byte, r.ReplyLen)
	for _, p := range r.Processors {
		if p.Kind == ProcessorPut {
			copy(reply[p.DstOffset:], p.Bytes)
		} else {
			copy(reply[p.DstOffset:], payload[p.SrcOffset:p.SrcOffset+p.Length])
		}
	}
	return reply
}

// fuzzRule reads a rule from data, zeros once data runs out. Sizes are
// bounded a little above the limits so that most rules are near them.
func fuzzRule(data []byte) Rule {
	u8 := func() uint8 {
		if len(data) == 0 {
			return 0
		}
		v := data[0]
		data = data[1:]
		return v
	}
	u16 := func() uint16 { return uint16(u8()) | uint16(u8())<<8 }
	take := func(n int) []byte {
		n = min(n, len(data))
		b := bytes.Clone(data[:n])
		data = data[n:]
		return b
	}
	var r Rule
	r.Condition.Offset = u16() % (MaxCondEnd + 64)
	r.Condition.Pattern = take(int(u16() % (MaxCondLen + 64)))
	r.ReplyLen = u16() % (MaxUDPReply + 64)
	for range u8() % (MaxProcessors + 4) {
		p := Processor{Kind: ProcessorKind(u8() % 4), DstOffset: u16() % (MaxUDPReply + 64)}
		switch p.Kind {
		case ProcessorPut:
			p.Bytes = take(int(u16() % (MaxUDPReply + 64)))
		case ProcessorCopy:
			p.SrcOffset = u16() % (MaxCondEnd + 64)
			p.Length = u16() % (MaxCopyLen + 64)
		}
		r.Processors = append(r.Processors, p)
	}
	return r
}
