// Package dataplane measures Santa's XDP program through BPF_PROG_TEST_RUN:
// DNS-like rule sets of 1 to 1M rules, replies of 64 to 1400 bytes, hot and
// uniform request mixes. cmd/dpbench prints RESULT lines; the Go benchmarks
// in this package run a small subset.
package dataplane

// Request frames for the data-plane benchmark; its DNS-like rules are
// internal/pkttest's (SizedDNSRule).

import (
	"net/netip"

	"github.com/santa-offload/santa/internal/pkttest"
)

// Schemes name the name generators for flags.
var Schemes = map[string]func(int) string{"short": pkttest.Name, "long": pkttest.LongName}

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
