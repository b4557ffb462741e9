package datapath

// FuzzXDP runs random frames through the XDP program (BPF_PROG_TEST_RUN on
// loopback) and holds every verdict to a reference written from the
// kernel's own receive path, not from the data plane: a frame is answered
// only if the kernel would deliver it to the service's socket and a rule
// matches it, and then with exactly the reference's reply; every other
// frame passes untouched. With fix set, the checksums are recomputed after
// the fuzzer's changes, so that changed addresses, lengths and flags get
// past the checksum checks and reach the later ones.

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

func FuzzXDP(f *testing.F) {
	d := openTest(f)
	v4, v6 := boundUDP(f, "127.0.0.1:0"), boundUDP(f, "[::1]:0")
	dns := pkttest.DNSRule("www.example.com", []byte{0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1})
	ruleSet := []rule.Rule{hello(), dns}
	for _, c := range []model.ServiceID{register(f, d, v4), register(f, d, v6)} {
		if _, err := d.AddRules(c, ruleSet); err != nil {
			f.Fatal(err)
		}
	}
	ports := map[netip.AddrPort]bool{local(v4): true, local(v6): true}

	query := pkttest.DNSQuery(0xbeef, "www.example.com")
	for _, to := range []netip.AddrPort{local(v4), local(v6)} {
		for _, p := range [][]byte{[]byte("Hello"), []byte("Hello, world"), query, []byte("Hellx")} {
			f.Add(request(to, p).Bytes(), true)
			f.Add(request(to, p).Bytes(), false)
		}
	}

	f.Fuzz(func(t *testing.T, frame []byte, fix bool) {
		if len(frame) < 14 || len(frame) > 2048 {
			return // a test run takes whole Ethernet headers; requests are at most a frame
		}
		frame = bytes.Clone(frame)
		if fix {
			pkttest.FixChecksums(frame)
		}
		verdict, out := run(t, d.XDPProgram(), frame)
		want, delivered := kernelDelivers(frame, ports)
		var reply []byte
		if delivered {
			reply = referenceReply(ruleSet, want.Payload)
		}
		switch verdict {
		case xdpTX:
			if reply == nil {
				t.Fatalf("answered a frame the kernel would not deliver or no rule matches (delivered %v):\n%x", delivered, frame)
			}
			if exp := want.Reply(reply).Bytes(); !bytes.Equal(out, exp) {
				t.Fatalf("reply\n got %x\nwant %x\nto %x", out, exp, frame)
			}
		case xdpPass:
			if !bytes.Equal(out[4:], frame) {
				t.Fatalf("passed a changed frame\n got %x\nwant %x", out[4:], frame)
			}
		default:
			t.Fatalf("verdict %d for %x", verdict, frame)
		}
	})
}

// referenceReply is the reply the reference matcher (rules.Match) gives
// payload, or nil.
func referenceReply(rs []rule.Rule, payload []byte) []byte {
	ref := make([]rules.RefRule, len(rs))
	for i, r := range rs {
		ref[i] = rules.RefRule{ID: uint32(i), Rule: r}
	}
	best, ok := rules.Match(ref, payload)
	if !ok {
		return nil
	}
	return expectReply(best.Rule, payload)
}

// kernelDelivers says whether the kernel's receive path on loopback
// (eth_type_trans, ip_rcv_core / ip6_rcv_core, the route lookup, udp_rcv)
// delivers frame to one of the sockets at ports, and what it delivers.
func kernelDelivers(frame []byte, ports map[netip.AddrPort]bool) (pkttest.UDPFrame, bool) {
	var f pkttest.UDPFrame
	if len(frame) < 14 || !bytes.Equal(frame[0:6], serverMAC[:]) {
		return f, false // not PACKET_HOST on loopback's all-zero MAC
	}
	copy(f.DstMAC[:], frame[0:6])
	copy(f.SrcMAC[:], frame[6:12])
	ip := frame[14:]
	var udp []byte
	var src, dst netip.Addr
	var pseudoLen int
	switch binary.BigEndian.Uint16(frame[12:]) {
	case 0x0800:
		if len(ip) < 20 || ip[0]>>4 != 4 {
			return f, false
		}
		hl, total := int(ip[0]&0xf)*4, int(binary.BigEndian.Uint16(ip[2:]))
		if hl < 20 || total < hl || total > len(ip) || pkttest.OnesSum(ip[:hl]) != 0xffff {
			return f, false
		}
		if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 || ip[9] != 17 {
			return f, false // a fragment waits for reassembly; not UDP
		}
		src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		udp, pseudoLen = ip[hl:total], 12
	case 0x86dd:
		if len(ip) < 40 || ip[0]>>4 != 6 || ip[6] != 17 {
			return f, false
		}
		plen := int(binary.BigEndian.Uint16(ip[4:]))
		if plen > len(ip)-40 {
			return f, false
		}
		src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		udp, pseudoLen = ip[40:40+plen], 40
	default:
		return f, false
	}
	if len(udp) < 8 {
		return f, false
	}
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	if ulen < 8 || ulen > len(udp) {
		return f, false
	}
	udp = udp[:ulen] // udp_rcv trims to the UDP length
	check := binary.BigEndian.Uint16(udp[6:])
	if check == 0 && dst.Is6() {
		return f, false // IPv6 requires the checksum
	}
	if check != 0 {
		var pseudo []byte
		if pseudoLen == 12 {
			pseudo = append(append([]byte{}, ip[12:20]...), 0, 17, byte(ulen>>8), byte(ulen))
		} else {
			pseudo = append(append([]byte{}, ip[8:40]...), 0, 17, byte(ulen>>8), byte(ulen))
		}
		if pkttest.OnesSum(append(pseudo, udp...)) != 0xffff {
			return f, false
		}
	}
	f.Src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(udp[0:]))
	f.Dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(udp[2:]))
	if !ports[f.Dst] {
		return f, false // the sockets are bound to one address each
	}
	f.Payload = udp[8:]
	return f, true
}
