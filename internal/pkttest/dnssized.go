package pkttest

// DNS-like rule sets of many names and any reply size, for the data-plane
// benchmarks and the daemon's tests: the names share long prefixes, as a
// zone's do.

import (
	"encoding/binary"
	"fmt"

	"github.com/santa-offload/santa/rule"
)

// Name is the n-th benchmark name. All names share the 10 bytes of DNS
// header after the transaction id, "\x03www" and "example-" (23 bytes of the
// condition); they differ in the number and hence in the label length byte.
func Name(n int) string { return fmt.Sprintf("www.example-%d.com", n) }

// LongName shares 60 bytes of QNAME before the number, so that every
// condition has the same first 64 bytes (the longest region the data plane
// hashes for a root lookup): all rules hang below one root and each lookup
// walks a level deeper in the index.
func LongName(n int) string {
	return fmt.Sprintf("www.a-deliberately-long-shared-label-for-the-trie-test.example-%d.com", n)
}

// answer is one TXT record (name: a pointer to the question) padded so that
// the reply to the query for qname is exactly size bytes of UDP payload.
func answer(qname string, size int) ([]byte, error) {
	a := []byte{0xc0, 0x0c, 0, 16, 0, 1, 0, 0, 0, 60, 0, 0}
	rdlen := size - len(DNSQuery(0, qname)) - len(a)
	if rdlen < 1 {
		return nil, fmt.Errorf("reply size %d too small for %q", size, qname)
	}
	binary.BigEndian.PutUint16(a[10:], uint16(rdlen))
	// Character strings of at most 255 bytes.
	for left := rdlen; left > 0; {
		n := min(left-1, 255)
		a = append(a, byte(n))
		for i := range n {
			a = append(a, 'a'+byte(i%26))
		}
		left -= n + 1
	}
	return a, nil
}

// SizedDNSRule answers a query for qname with a size-byte reply: DNSRule
// (condition: the query from offset 2, i.e. flags, counts, QNAME, QTYPE,
// QCLASS; reply: a put of the response plus a copy of the 2-byte
// transaction id) with the answer padded to size.
func SizedDNSRule(qname string, size int) (rule.Rule, error) {
	a, err := answer(qname, size)
	if err != nil {
		return rule.Rule{}, err
	}
	r := DNSRule(qname, a)
	if int(r.ReplyLen) != size {
		return rule.Rule{}, fmt.Errorf("reply for %q is %d bytes, want %d", qname, r.ReplyLen, size)
	}
	return r, nil
}

// SizedDNSReply is the reply payload of SizedDNSRule(qname, size) with transaction id
// 0 (the rule's template).
func SizedDNSReply(qname string, size int) ([]byte, error) {
	r, err := SizedDNSRule(qname, size)
	if err != nil {
		return nil, err
	}
	c, err := rule.Compile(r)
	if err != nil {
		return nil, err
	}
	return c.Template, nil
}
