package rule_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/rule"
)

// simulate applies processors in order to a zeroed reply: the semantics
// Compile must reproduce statically.
func simulate(r rule.Rule, payload []byte) ([]byte, bool) {
	reply := make([]byte, r.ReplyLen)
	for _, p := range r.Processors {
		switch p.Kind {
		case rule.ProcessorPut:
			copy(reply[p.DstOffset:], p.Bytes)
		case rule.ProcessorCopy:
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
		procs    []rule.Processor
		replyLen uint16
		template string
		copies   []rule.CopyPiece
	}{
		{"puts only, later wins", []rule.Processor{rule.Put(0, []byte("hello")), rule.Put(3, []byte("LO!"))}, 8,
			"helLO!\x00\x00", nil},
		{"copy split by a later put", []rule.Processor{rule.Copy(0, 10, 0), rule.Put(4, []byte("--"))}, 10,
			"\x00\x00\x00\x00--\x00\x00\x00\x00", []rule.CopyPiece{{Src: 0, Dst: 0, Len: 4}, {Src: 6, Dst: 6, Len: 4}}},
		{"later copy over an earlier one", []rule.Processor{rule.Copy(0, 8, 2), rule.Copy(10, 4, 4)}, 10,
			"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
			[]rule.CopyPiece{{Src: 0, Dst: 2, Len: 2}, {Src: 10, Dst: 4, Len: 4}, {Src: 6, Dst: 8, Len: 2}}},
		{"copy over a put zeroes the template", []rule.Processor{rule.Put(0, []byte("abcdef")), rule.Copy(12, 2, 2)}, 6,
			"ab\x00\x00ef", []rule.CopyPiece{{Src: 12, Dst: 2, Len: 2}}},
		{"copy entirely overwritten", []rule.Processor{rule.Copy(15, 3, 1), rule.Put(0, []byte("XYZW"))}, 4,
			"XYZW", nil},
		{"put, copy, put", []rule.Processor{rule.Put(0, []byte("aaaaaa")), rule.Copy(0, 4, 1), rule.Put(2, []byte("b"))}, 6,
			"a\x00b\x00\x00a", []rule.CopyPiece{{Src: 0, Dst: 1, Len: 1}, {Src: 2, Dst: 3, Len: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rule.Rule{Condition: rule.Condition{Pattern: []byte("0")}, Processors: tt.procs, ReplyLen: tt.replyLen}
			c, err := rule.Compile(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(c.Template) != tt.template {
				t.Errorf("template %q; want %q", c.Template, tt.template)
			}
			if !slices.Equal(c.Copies, tt.copies) {
				t.Errorf("copies %v; want %v", c.Copies, tt.copies)
			}
			if c.Csum != rule.Sum16LE([]byte(tt.template), 0) {
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
	procs := []rule.Processor{rule.Copy(0, 20, 0)}
	for i := range uint16(7) {
		procs = append(procs, rule.Copy(100, 1, 1+2*i))
	}
	_, err := rule.Compile(rule.Rule{Condition: rule.Condition{Pattern: []byte("x")}, Processors: procs, ReplyLen: 20})
	var le *rule.LimitError
	if !errors.As(err, &le) || le.Value != 15 || le.Limit != rule.MaxCopies {
		t.Fatalf("Compile = %v; want 15 pieces over the limit of %d", err, rule.MaxCopies)
	}
}

func TestCompileRejectsInvalid(t *testing.T) {
	if _, err := rule.Compile(rule.Rule{Condition: rule.Condition{Pattern: []byte("x")}}); err == nil {
		t.Fatal("Compile accepted a rule without a reply")
	}
}

// TestCompileRandom checks Compile against simulate and checks the checksum
// convention the data plane relies on: the reply's sum is the template's sum
// plus the sum of each copied piece at its reply position.
func TestCompileRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	compiled := 0
	for range 20000 {
		r := pkttest.RandomRule(rng, 60)
		c, err := rule.Compile(r)
		var le *rule.LimitError
		if errors.As(err, &le) && le.Limit == rule.MaxCopies {
			continue
		}
		if err != nil {
			t.Fatalf("Compile(%+v): %v", r, err)
		}
		compiled++
		for i, p := range c.Copies {
			if p.Len == 0 || int(p.Len) > rule.MaxCopyLen || i > 0 && c.Copies[i-1].Dst+c.Copies[i-1].Len > p.Dst {
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
			sum = rule.Sum16LE(part, sum)
		}
		if rule.Fold(sum) != rule.Fold(rule.Sum16LE(got, 0)) {
			t.Fatalf("template sum plus pieces %#x != reply sum %#x", rule.Fold(sum), rule.Fold(rule.Sum16LE(got, 0)))
		}
	}
	if compiled < 15000 {
		t.Fatalf("only %d random rules compiled", compiled)
	}
}
