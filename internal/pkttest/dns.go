package pkttest

import (
	"bytes"

	"github.com/santa-offload/santa/rule"
)

// DNSQuery is a standard query (RD set) for an A record of name.
func DNSQuery(txid uint16, name string) []byte {
	q := []byte{byte(txid >> 8), byte(txid), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, label := range bytes.Split([]byte(name), []byte(".")) {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	return append(q, 0, 0, 1, 0, 1)
}

// DNSRule answers DNSQuery(*, name) with one answer record: the condition is
// the query from byte 2 on (flags, counts, question), the reply puts the
// response and copies the transaction id.
func DNSRule(name string, answer []byte) rule.Rule {
	q := DNSQuery(0, name)
	reply := append(append([]byte{0, 0, 0x81, 0x80}, q[4:]...), answer...)
	reply[7] = 1 // one answer
	return rule.Rule{
		Condition: rule.Condition{Offset: 2, Pattern: q[2:]},
		Processors: []rule.Processor{
			rule.Put(2, reply[2:]),
			rule.Copy(0, 2, 0),
		},
		ReplyLen: uint16(len(reply)),
	}
}
