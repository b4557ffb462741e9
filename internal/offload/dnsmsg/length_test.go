package dnsmsg

import (
	"bytes"
	"testing"
)

// A query with a byte more or less than the one learned is another
// query: the server may answer it otherwise (FORMERR).
func TestRuleMatchesOnlyItsLength(t *testing.T) {
	query := NewQuery(Name{3, 'w', 'w', 'w', 0}, 1, ClassIN)
	reply := append([]byte{0, 0, 0x84, 0, 0, 1, 0, 0, 0, 0, 0, 0}, query[HeaderLen:]...)
	c := Rule(query, reply).Condition
	if !c.Matches(query) || c.Matches(append(bytes.Clone(query), 0)) || c.Matches(query[:len(query)-1]) {
		t.Fatal("the rule matches a query longer or shorter than its own")
	}
}
