// Package dataplane measures Santa's XDP program through BPF_PROG_TEST_RUN:
// DNS-like rule sets of 1 to 1M rules, replies of 64 to 1400 bytes, hot and
// uniform request mixes. cmd/dpbench prints RESULT lines; the Go benchmarks
// in this package run a small subset.
package dataplane

// DNS-like rules and request frames for the data-plane benchmark, on top of
// internal/pkttest.

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/santa-offload/santa/internal/pkttest"
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

// Schemes name the name generators for flags.
var Schemes = map[string]func(int) string{"short": Name, "long": LongName}

// DNSQuery is pkttest.DNSQuery: a standard query (RD set) for an A record.
func DNSQuery(txid uint16, qname string) []byte { return pkttest.DNSQuery(txid, qname) }

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

// DNSRule answers a query for qname with a size-byte reply: pkttest.DNSRule
// (condition: the query from offset 2, i.e. flags, counts, QNAME, QTYPE,
// QCLASS; reply: a put of the response plus a copy of the 2-byte
// transaction id) with the answer padded to size.
func DNSRule(qname string, size int) (rule.Rule, error) {
	a, err := answer(qname, size)
	if err != nil {
		return rule.Rule{}, err
	}
	r := pkttest.DNSRule(qname, a)
	if int(r.ReplyLen) != size {
		return rule.Rule{}, fmt.Errorf("reply for %q is %d bytes, want %d", qname, r.ReplyLen, size)
	}
	return r, nil
}

// DNSReply is the reply payload of DNSRule(qname, size) with transaction id
// 0 (the rule's template).
func DNSReply(qname string, size int) ([]byte, error) {
	r, err := DNSRule(qname, size)
	if err != nil {
		return nil, err
	}
	c, err := rule.Compile(r)
	if err != nil {
		return nil, err
	}
	return c.Template, nil
}

// Test runs happen on loopback, whose address is all zeros: the data
// plane answers only frames for its device's MAC.
var (
	clientMAC = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	serverMAC = [6]byte{}
)

// UDP4Frame is an Ethernet/IPv4/UDP frame with correct checksums
// (pkttest.UDPFrame).
func UDP4Frame(src, dst netip.AddrPort, payload []byte) []byte {
	return pkttest.UDPFrame{SrcMAC: clientMAC, DstMAC: serverMAC, Src: src, Dst: dst,
		Payload: payload, TTL: 64, IPID: 77}.Bytes()
}
