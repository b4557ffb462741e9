package gen

import (
	"net/netip"

	"github.com/santa-offload/santa/internal/pkttest"
)

// Endpoints are the two ends requests travel between.
type Endpoints struct {
	SrcMAC, DstMAC [6]byte
	Src, Dst       netip.AddrPort // the client (replies come back here) and the server
}

// UDPFrames builds one request frame per payload, IPv4 or IPv6 as the
// addresses are, with correct IP and UDP checksums.
func UDPFrames(e Endpoints, payloads [][]byte) [][]byte {
	frames := make([][]byte, len(payloads))
	for i, p := range payloads {
		frames[i] = pkttest.UDPFrame{SrcMAC: e.SrcMAC, DstMAC: e.DstMAC, Src: e.Src, Dst: e.Dst,
			Payload: p, TTL: 64, DF: true}.Bytes()
	}
	return frames
}
