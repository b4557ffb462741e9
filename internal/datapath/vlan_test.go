package datapath

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/pkttest"
)

// A request whose VLAN tag travels beside the frame's bytes (veth's
// default tx-vlan-offload; a NIC's rx-vlan-offload), on a host with no
// device for that VLAN: the stack drops it, and so it is not answered,
// by XDP (a peer with NAPI) or TC (a peer without), while the same
// request untagged is.
func TestVLANTaggedRequestNotAnswered(t *testing.T) {
	t.Run("tc", func(t *testing.T) { vlanTaggedRequest(t, false) })
	t.Run("xdp", func(t *testing.T) { vlanTaggedRequest(t, true) })
}

func vlanTaggedRequest(t *testing.T, peerNAPI bool) {
	back := enterNewNetns(t)
	defer back()
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "vl0", "type", "veth", "peer", "name", "vl1"},
		{"addr", "add", "10.77.0.1/24", "dev", "vl0"},
		{"link", "set", "vl0", "up"},
		{"link", "set", "vl1", "up"},
	} {
		if err := exec("ip", args...); err != nil {
			t.Fatalf("ip %v: %v", args, err)
		}
	}
	if peerNAPI {
		if err := exec("ethtool", "-K", "vl1", "gro", "on"); err != nil {
			t.Fatal(err)
		}
	}
	d := openTest(t)
	if _, err := d.Attach("vl0"); err != nil {
		t.Fatal(err)
	}
	defer d.Detach("vl0")
	server := boundUDP(t, "10.77.0.1:0")
	other := boundUDP(t, "10.77.0.1:0") // without rules: what the stack delivers
	id := register(t, d, server)
	if _, err := d.AddRule(id, hello()); err != nil {
		t.Fatal(err)
	}
	frame := func(to *net.UDPConn) []byte {
		return pkttest.UDPFrame{SrcMAC: macOf(t, "vl1"), DstMAC: macOf(t, "vl0"), Src: netip.MustParseAddrPort("10.77.0.2:40000"),
			Dst: local(to), Payload: []byte("Hello"), TTL: 64}.Bytes()
	}
	// answers sends the request from vl1: whether the data plane answers
	// it within 300 ms.
	answers := func() bool {
		t.Helper()
		ps, err := d.PathStats()
		if err != nil {
			t.Fatal(err)
		}
		before := ps["answered"]
		packetSend(t, "vl1", frame(server))
		return eventually(300*time.Millisecond, 5*time.Millisecond, func() bool {
			ps, err := d.PathStats()
			return err == nil && ps["answered"] > before
		})
	}
	// delivered sends the request to the socket without rules: whether
	// the stack delivers it.
	delivered := func() bool {
		t.Helper()
		packetSend(t, "vl1", frame(other))
		other.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, _, err := other.ReadFrom(make([]byte, 64))
		return err == nil
	}
	if !answers() || !delivered() {
		t.Fatal("the request untagged was not answered, or not delivered")
	}
	defer tagVLAN(t, "vl1", 100)()
	if delivered() {
		t.Fatal("the stack delivered a request of VLAN 100 with no VLAN 100 device")
	}
	if answers() {
		t.Fatal("a request of VLAN 100, which the stack drops (no VLAN 100 device), was answered")
	}
}

// packetSend sends frame out of ifname as it is (AF_PACKET).
func packetSend(t *testing.T, ifname string, frame []byte) {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index, Halen: 6}
	copy(to.Addr[:], frame[:6])
	if err := unix.Sendto(fd, frame, 0, to); err != nil {
		t.Fatal(err)
	}
}

func macOf(t *testing.T, ifname string) [6]byte {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	return [6]byte(ifi.HardwareAddr)
}

// tagVLAN gives every frame ifname sends the VLAN tag vid beside its
// bytes (bpf_skb_vlan_push on a device with tx-vlan-offload, as a VLAN
// device over veth does), until the returned func.
func tagVLAN(t *testing.T, ifname string, vid int32) func() {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.SchedCLS,
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R2, int32(htons(unix.ETH_P_8021Q))),
			asm.Mov.Imm(asm.R3, vid),
			asm.FnSkbVlanPush.Call(),
			asm.Mov.Imm(asm.R0, -1), // TCX_NEXT
			asm.Return(),
		},
		License: "GPL",
	})
	if err != nil {
		t.Fatal(err)
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: prog, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		prog.Close()
		t.Fatal(err)
	}
	return func() { l.Close(); prog.Close() }
}
