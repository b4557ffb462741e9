// Package pkttest builds packets and rules for tests and benchmarks:
// Ethernet/IP/UDP frames whose checksums are computed with a plain RFC 1071
// sum, independently of the data plane, and DNS queries with matching rules.
package pkttest

import (
	"encoding/binary"
	"net/netip"
)

// UDPFrame describes an Ethernet/IP/UDP frame for fixtures. Checksums are
// computed here with a plain RFC 1071 sum, independently of the data plane.
type UDPFrame struct {
	SrcMAC, DstMAC [6]byte
	Src, Dst       netip.AddrPort
	Payload        []byte
	TTL            uint8
	IPID           uint16
	DF             bool
	TOS            uint8
	NoUDPCsum      bool // IPv4 only: checksum field 0
	// PartialUDPCsum leaves the checksum to offload, as a local sender's
	// stack does (CHECKSUM_PARTIAL): the field holds the pseudo header's
	// sum, not inverted.
	PartialUDPCsum bool
}

// Bytes is the frame on the wire.
func (f UDPFrame) Bytes() []byte {
	udpLen := 8 + len(f.Payload)
	eth := make([]byte, 14)
	copy(eth[0:6], f.DstMAC[:])
	copy(eth[6:12], f.SrcMAC[:])
	var ip, pseudo []byte
	if f.Src.Addr().Is4() {
		binary.BigEndian.PutUint16(eth[12:], 0x0800)
		ip = make([]byte, 20)
		ip[0] = 0x45
		ip[1] = f.TOS
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		binary.BigEndian.PutUint16(ip[4:], f.IPID)
		if f.DF {
			ip[6] = 0x40
		}
		ip[8] = f.TTL
		ip[9] = 17
		s, d := f.Src.Addr().As4(), f.Dst.Addr().As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		binary.BigEndian.PutUint16(ip[10:], ^fold(sum(ip)))
		pseudo = append(append(append([]byte{}, s[:]...), d[:]...), 0, 17, byte(udpLen>>8), byte(udpLen))
	} else {
		binary.BigEndian.PutUint16(eth[12:], 0x86dd)
		ip = make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6] = 17
		ip[7] = f.TTL
		s, d := f.Src.Addr().As16(), f.Dst.Addr().As16()
		copy(ip[8:24], s[:])
		copy(ip[24:40], d[:])
		pseudo = append(append(append([]byte{}, s[:]...), d[:]...), 0, 0, byte(udpLen>>8), byte(udpLen), 0, 0, 0, 17)
	}
	udp := make([]byte, 8, udpLen)
	binary.BigEndian.PutUint16(udp[0:], f.Src.Port())
	binary.BigEndian.PutUint16(udp[2:], f.Dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	udp = append(udp, f.Payload...)
	switch {
	case f.PartialUDPCsum:
		binary.BigEndian.PutUint16(udp[6:], fold(sum(pseudo)))
	case !f.NoUDPCsum:
		c := ^fold(sum(pseudo) + sum(udp))
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(udp[6:], c)
	}
	return append(append(eth, ip...), udp...)
}

// Reply is the frame the data plane must send back for f with payload p.
// A reply to a request with a partial checksum keeps it partial.
func (f UDPFrame) Reply(p []byte) UDPFrame {
	return UDPFrame{SrcMAC: f.DstMAC, DstMAC: f.SrcMAC, Src: f.Dst, Dst: f.Src,
		Payload: p, TTL: 64, DF: f.Src.Addr().Is4(), PartialUDPCsum: f.PartialUDPCsum}
}

// OnesSum is the folded ones-complement sum of b (RFC 1071): 0xffff over
// a header or a datagram (with its pseudo header) whose checksum is right.
func OnesSum(b []byte) uint16 { return fold(sum(b)) }

func sum(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// FixIPv4Checksum recomputes the IPv4 header checksum of an option-less
// frame that a test changed after Bytes, so that the change is the only
// thing wrong with it.
func FixIPv4Checksum(frame []byte) {
	ip := frame[14:34]
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum(ip)))
}

// FixChecksums recomputes the IPv4 header checksum (option-less headers)
// and the UDP checksum of a frame that a test or fuzzer changed after
// Bytes, so that the change gets past the checksum checks. It leaves alone
// whatever is too short or inconsistent to hold them.
func FixChecksums(frame []byte) {
	if len(frame) < 14 {
		return
	}
	var addrs, udp []byte
	switch binary.BigEndian.Uint16(frame[12:]) {
	case 0x0800:
		if len(frame) < 34 || frame[14] != 0x45 {
			return
		}
		FixIPv4Checksum(frame)
		addrs, udp = frame[26:34], frame[34:]
	case 0x86dd:
		if len(frame) < 54 {
			return
		}
		addrs, udp = frame[22:54], frame[54:]
	default:
		return
	}
	if len(udp) < 8 {
		return
	}
	n := int(binary.BigEndian.Uint16(udp[4:]))
	if n < 8 || n > len(udp) {
		return
	}
	udp = udp[:n]
	// Both families' pseudo headers sum to the addresses, the protocol and
	// the length.
	pseudo := append(append([]byte{}, addrs...), 0, 17, byte(n>>8), byte(n))
	udp[6], udp[7] = 0, 0
	c := ^fold(sum(pseudo) + sum(udp))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
}
