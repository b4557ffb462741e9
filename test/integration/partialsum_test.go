package integration

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/santa-offload/santa/internal/pkttest"
	"golang.org/x/sys/unix"
)

// partialVerifies is whether a UDP datagram of payload from src to dst,
// sent with a partial checksum (the field holding the pseudo header's
// folded sum, as the kernel leaves it for an offloading device: loopback
// always), would also pass as a full checksum. About one in 65,536 does;
// generic XDP, which cannot tell a partial checksum from a full one,
// rightly answers those, so tests over loopback count them apart.
func partialVerifies(src, dst netip.AddrPort, payload []byte) bool {
	length := binary.BigEndian.AppendUint16(nil, uint16(8+len(payload)))
	// The IPv6 pseudo header (addresses, a 32-bit length, the next header
	// in a 32-bit word) has the same ones-complement sum as this.
	pseudo := append(src.Addr().AsSlice(), dst.Addr().AsSlice()...)
	pseudo = append(pseudo, 0, unix.IPPROTO_UDP)
	pseudo = append(pseudo, length...)
	udp := binary.BigEndian.AppendUint16(nil, src.Port())
	udp = binary.BigEndian.AppendUint16(udp, dst.Port())
	udp = append(udp, length...)
	udp = binary.BigEndian.AppendUint16(udp, pkttest.OnesSum(pseudo))
	udp = append(udp, payload...)
	return pkttest.OnesSum(append(pseudo, udp...)) == 0xffff
}

// partialVerifiesConn is partialVerifies for a payload sent over conn.
func partialVerifiesConn(conn *net.UDPConn, payload []byte) bool {
	src := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	dst := conn.RemoteAddr().(*net.UDPAddr).AddrPort()
	return partialVerifies(netip.AddrPortFrom(src.Addr().Unmap(), src.Port()),
		netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port()), payload)
}
