package rules

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// simulate applies processors in order to a zeroed reply: the semantics
// Compile must reproduce statically.
func simulate(r Rule, payload []byte) ([]byte, bool) {
	reply := make([]byte, r.ReplyLen)
	for _, p := range r.Processors {
		switch p.Kind {
		case ProcessorPut:
			copy(reply[p.DstOffset:], p.Bytes)
		case ProcessorCopy:
			end := int(p.SrcOffset) + int(p.Length)
			if end > len(payload) {
				return nil, false
			}
			copy(reply[p.DstOffset:], payload[p.SrcOffset:end])
		}
	}
	return reply, true
}

func TestCompile(t *testing.T) {
	payload := []byte("0123456789abcdefghij")
	tests := []struct {
		name     string
		procs    []Processor
		replyLen uint16
		template string
		copies   []CopyPiece
	}{
		{"puts only, later wins", []Processor{Put(0, []byte("hello")), Put(3, []byte("LO!"))}, 8,
			"helLO!\x00\x00", nil},
		{"copy split by a later put", []Processor{Copy(0, 10, 0), Put(4, []byte("--"))}, 10,
			"\x00\x00\x00\x00--\x00\x00\x00\x00", []CopyPiece{{Src: 0, Dst: 0, Len: 4}, {Src: 6, Dst: 6, Len: 4}}},
		{"later copy over an earlier one", []Processor{Copy(0, 8, 2), Copy(10, 4, 4)}, 10,
			"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
			[]CopyPiece{{Src: 0, Dst: 2, Len: 2}, {Src: 10, Dst: 4, Len: 4}, {Src: 6, Dst: 8, Len: 2}}},
		{"copy over a put zeroes the template", []Processor{Put(0, []byte("abcdef")), Copy(12, 2, 2)}, 6,
			"ab\x00\x00ef", []CopyPiece{{Src: 12, Dst: 2, Len: 2}}},
		{"copy entirely overwritten", []Processor{Copy(15, 3, 1), Put(0, []byte("XYZW"))}, 4,
			"XYZW", nil},
		{"put, copy, put", []Processor{Put(0, []byte("aaaaaa")), Copy(0, 4, 1), Put(2, []byte("b"))}, 6,
			"a\x00b\x00\x00a", []CopyPiece{{Src: 0, Dst: 1, Len: 1}, {Src: 2, Dst: 3, Len: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rule{Condition: Condition{Pattern: []byte("0")}, Processors: tt.procs, ReplyLen: tt.replyLen}
			c, err := Compile(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(c.Template) != tt.template {
				t.Errorf("template %q; want %q", c.Template, tt.template)
			}
			if !slices.Equal(c.Copies, tt.copies) {
				t.Errorf("copies %v; want %v", c.Copies, tt.copies)
			}
			if c.Csum != Sum16LE([]byte(tt.template), 0) {
				t.Errorf("csum %#x; want the template's sum", c.Csum)
			}
			got, ok := c.Reply(payload)
			want, _ := simulate(r, payload)
			if !ok || !bytes.Equal(got, want) {
				t.Errorf("Reply = %q, %v; want %q", got, ok, want)
			}
		})
	}
}

func TestCompileTooManyPieces(t *testing.T) {
	// One long copy cut by seven one-byte copies: 8 + 7 pieces.
	procs := []Processor{Copy(0, 20, 0)}
	for i := range uint16(7) {
		procs = append(procs, Copy(100, 1, 1+2*i))
	}
	_, err := Compile(Rule{Condition: Condition{Pattern: []byte("x")}, Processors: procs, ReplyLen: 20})
	var le *LimitError
	if !errors.As(err, &le) || le.Value != 15 || le.Limit != MaxCopies {
		t.Fatalf("Compile = %v; want 15 pieces over the limit of %d", err, MaxCopies)
	}
}

func TestCompileRejectsInvalid(t *testing.T) {
	if _, err := Compile(Rule{Condition: Condition{Pattern: []byte("x")}}); err == nil {
		t.Fatal("Compile accepted a rule without a reply")
	}
}

func randomRule(rng *rand.Rand, maxSrc int) Rule {
	r := Rule{Condition: Condition{Pattern: []byte("x")}, ReplyLen: uint16(1 + rng.IntN(40))}
	for range rng.IntN(MaxProcessors + 1) {
		dst := rng.IntN(int(r.ReplyLen))
		n := 1 + rng.IntN(int(r.ReplyLen)-dst)
		if rng.IntN(2) == 0 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(1 + rng.IntN(255))
			}
			r.Processors = append(r.Processors, Put(uint16(dst), b))
		} else {
			r.Processors = append(r.Processors, Copy(uint16(rng.IntN(maxSrc)), uint16(n), uint16(dst)))
		}
	}
	return r
}

// TestCompileRandom checks Compile against simulate and checks the checksum
// convention the data plane relies on: the reply's sum is the template's sum
// plus the sum of each copied piece at its reply position.
func TestCompileRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	compiled := 0
	for range 20000 {
		r := randomRule(rng, 60)
		c, err := Compile(r)
		var le *LimitError
		if errors.As(err, &le) && le.Limit == MaxCopies {
			continue
		}
		if err != nil {
			t.Fatalf("Compile(%+v): %v", r, err)
		}
		compiled++
		for i, p := range c.Copies {
			if p.Len == 0 || int(p.Len) > MaxCopyLen || i > 0 && c.Copies[i-1].Dst+c.Copies[i-1].Len > p.Dst {
				t.Fatalf("pieces %v are not disjoint, non-empty and ordered", c.Copies)
			}
		}
		payload := make([]byte, rng.IntN(80))
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		got, ok := c.Reply(payload)
		want, wantOK := simulate(r, payload)
		if ok && !wantOK {
			// The payload lacks bytes of a copy that is overwritten entirely;
			// the reply does not need them.
			if c.SourceEnd() > len(payload) {
				t.Fatalf("Reply answered although a piece reads beyond the payload")
			}
			continue
		}
		if !ok {
			if c.SourceEnd() <= len(payload) {
				t.Fatalf("Reply refused although every piece fits")
			}
			continue
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("rule %+v payload %x: Reply %x; want %x", r, payload, got, want)
		}
		sum := c.Csum
		for _, p := range c.Copies {
			part := make([]byte, r.ReplyLen)
			copy(part[p.Dst:], payload[p.Src:p.Src+p.Len])
			sum = Sum16LE(part, sum)
		}
		if Fold(sum) != Fold(Sum16LE(got, 0)) {
			t.Fatalf("template sum plus pieces %#x != reply sum %#x", Fold(sum), Fold(Sum16LE(got, 0)))
		}
	}
	if compiled < 15000 {
		t.Fatalf("only %d random rules compiled", compiled)
	}
}
