package main

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/dnstest"
	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

// TestRule: the rule for name i answers exactly the query for name
// i, with the captured reply and the query's transaction id.
func TestRule(t *testing.T) {
	var refs []rules.RefRule
	captured := map[int][]byte{}
	for i := range 3 {
		// A reply as a server captured with transaction id 0: flags, counts,
		// the question and an answer record.
		reply := append([]byte{0, 0, 0x85, 0x00}, query(0, i)[4:]...)
		binary.BigEndian.PutUint16(reply[6:], 1)
		reply = append(reply, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 10, 0, 0, byte(i))
		captured[i] = reply
		refs = append(refs, rules.RefRule{ID: uint32(i), Rule: scenario.Rule(query, i, reply)})
	}
	for i := range 3 {
		q := query(0xbeef, i)
		got, ok := rules.Match(refs, q)
		if !ok || got.ID != uint32(i) {
			t.Fatalf("query for %s: matched %v (rule %d), want rule %d", dnstest.Name(i), ok, got.ID, i)
		}
		c, err := rule.Compile(got.Rule)
		if err != nil {
			t.Fatal(err)
		}
		reply, ok := c.Reply(q)
		want := append([]byte{0xbe, 0xef}, captured[i][2:]...)
		if !ok || !bytes.Equal(reply, want) {
			t.Errorf("reply to %s:\n got %x\nwant %x", dnstest.Name(i), reply, want)
		}
	}
	// Another name, or another query type, is the server's.
	other := query(1, 7)
	if _, ok := rules.Match(refs, other); ok {
		t.Error("the query for a name without a rule matched")
	}
	aaaa := query(1, 0)
	aaaa[len(aaaa)-3] = 28
	if _, ok := rules.Match(refs, aaaa); ok {
		t.Error("an AAAA query matched the A rule")
	}
}
