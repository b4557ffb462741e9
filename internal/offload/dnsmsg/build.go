package dnsmsg

import (
	"bytes"
	"encoding/binary"

	"github.com/santa-offload/santa/rule"
)

// NewQuery is a query for name, type and class with id 0 and no flags (no
// RD: the agent asks an authoritative server about its own zones), without
// EDNS.
func NewQuery(name Name, qtype, qclass uint16) []byte {
	q := make([]byte, HeaderLen, HeaderLen+len(name)+4)
	binary.BigEndian.PutUint16(q[4:], 1) // QDCOUNT
	q = append(q, name...)
	q = binary.BigEndian.AppendUint16(q, qtype)
	return binary.BigEndian.AppendUint16(q, qclass)
}

// Rule is the rule that answers query with reply: it matches every byte
// of the query after the transaction id, and only a query of exactly that
// length (a byte more or less is another query, which the server may
// answer otherwise); it answers with the reply's bytes after the id and
// copies the id from the request. query and reply passed CheckQuery and
// CheckReply.
func Rule(query, reply []byte) rule.Rule {
	cond := rule.Condition{Offset: 2, Pattern: bytes.Clone(query[2:])}
	return rule.Rule{
		Condition:  rule.ExactLength(cond, uint16(len(query))),
		Processors: []rule.Processor{rule.Put(2, reply[2:]), rule.Copy(0, 2, 0)},
		ReplyLen:   uint16(len(reply)),
	}
}
