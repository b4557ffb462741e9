package dnsmsg_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	. "github.com/santa-offload/santa/internal/offload/dnsmsg/dnstest"
	"github.com/santa-offload/santa/rule"
)

func TestNewQuery(t *testing.T) {
	got := dnsmsg.NewQuery(Name("Example.com"), dnsmsg.TypeSOA, dnsmsg.ClassIN)
	want := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'E', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 6, 0, 1}
	if !bytes.Equal(got, want) {
		t.Fatalf("NewQuery = %x; want %x", got, want)
	}
	if _, err := dnsmsg.CheckQuery(got); err != nil {
		t.Fatalf("CheckQuery(NewQuery) = %v", err)
	}
}

func TestRule(t *testing.T) {
	query := Query(0x1111, RD, "www.example.com", TypeA, OPT(1232))
	reply := Msg{ID: 0x1111, Flags: QR | AA | RD, Questions: []Question{Q("www.example.com", TypeA)},
		Answer: []RR{A("www.example.com", 192, 0, 2, 1)}, Additional: []RR{OPT(1232)}}.Bytes()
	r := dnsmsg.Rule(query, reply)
	want := rule.Rule{
		Condition: rule.Condition{Offset: 2, Pattern: query[2:]},
		Processors: []rule.Processor{
			{Kind: rule.ProcessorPut, DstOffset: 2, Bytes: reply[2:]},
			{Kind: rule.ProcessorCopy, SrcOffset: 0, Length: 2, DstOffset: 0},
		},
		ReplyLen: uint16(len(reply)),
	}
	if !reflect.DeepEqual(r.Processors, want.Processors) || r.ReplyLen != want.ReplyLen ||
		r.Condition.Offset != 2 || !bytes.Equal(r.Condition.Pattern, query[2:]) {
		t.Fatalf("Rule = %+v;\nwant %+v", r, want)
	}
	if err := r.Validate(rule.DefaultUDPLimits); err != nil {
		t.Fatal(err)
	}
	// The rule answers the same query with another id with the reply and
	// that id.
	c, err := rule.Compile(r)
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.Clone(query)
	other[0], other[1] = 0xab, 0xcd
	got, ok := c.Reply(other)
	wantReply := append([]byte{0xab, 0xcd}, reply[2:]...)
	if !r.Condition.Matches(other) || !ok || !bytes.Equal(got, wantReply) {
		t.Fatalf("the rule answers %x with %x (%v); want %x", other, got, ok, wantReply)
	}
	// The rule keeps its own copies.
	query[5]++
	reply[5]++
	if bytes.Equal(r.Condition.Pattern, query[2:]) || bytes.Equal(r.Processors[0].Bytes, reply[2:]) {
		t.Fatal("the rule shares bytes with the query or the reply")
	}
}
