package integration

// The packet matrix: malformed and misaddressed requests sent over the
// rig's veth, first without Santa, then with Santa attached and a rule
// matching every one of them. Santa may answer only what the application
// receives without it, and every request it does not answer must reach the
// application exactly as it did without Santa. Each case runs with full
// UDP checksums (as from a NIC) and with partial ones (as from a local
// sender over a veth with its default offloads, which the rig keeps, so
// that they stay partial): XDP answers both, the partial ones because veth's
// skb vouches for them (bpf/include/veth.h).

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/rule"
)

const (
	matrixPort   = 7000
	matrixWait   = 300 * time.Millisecond // for what a batch of frames makes happen
	caseDeadline = 2 * time.Second        // for one case's reply or delivery
)

var (
	srvMAC = [6]byte{0x02, 0x77, 0, 0, 0, 0x01} // bench/rig.sh
	cliMAC = [6]byte{0x02, 0x77, 0, 0, 0, 0x02}
)

// deliveryCase is one request; the client port tells its reply and its
// delivery apart from the others'.
type deliveryCase struct {
	name   string
	frame  pkttest.UDPFrame
	raw    func([]byte) // changes the built frame
	answer bool         // Santa answers it
	path   string       // the path counter it leaves with
	// partialPath, if set, is the path with a partial checksum, which
	// answers as partialAnswer says: a checksum field only a full checksum
	// can get wrong.
	partialPath   string
	partialAnswer bool
	keepPort      bool // its source port is the case's (else 30000 + its index)
}

// outcome is what the case expects with full or partial checksums.
func (c deliveryCase) outcome(partial bool) (answer bool, path string) {
	if partial && c.partialPath != "" {
		return c.partialAnswer, c.partialPath
	}
	return c.answer, c.path
}

func deliveryCases(linkLocalSrv, linkLocalCli netip.Addr) []deliveryCase {
	srv4, srv6 := netip.MustParseAddr(serverIPv4), netip.MustParseAddr(serverIPv6)
	cli4, cli6 := netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("fd77::2")
	addr := netip.MustParseAddr
	req := func(src, dst netip.Addr, payload string) pkttest.UDPFrame {
		return pkttest.UDPFrame{SrcMAC: cliMAC, DstMAC: srvMAC, Src: netip.AddrPortFrom(src, 0),
			Dst: netip.AddrPortFrom(dst, matrixPort), Payload: []byte(payload), TTL: 64, IPID: 1}
	}
	fromPort := func(f pkttest.UDPFrame, port uint16) pkttest.UDPFrame {
		f.Src = netip.AddrPortFrom(f.Src.Addr(), port)
		return f
	}
	withMAC := func(f pkttest.UDPFrame, src, dst [6]byte) pkttest.UDPFrame {
		f.SrcMAC, f.DstMAC = src, dst
		return f
	}
	broadcastMAC := [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	return []deliveryCase{
		{name: "ipv4", frame: req(cli4, srv4, "Hello"), answer: true, path: "answered"},
		{name: "ipv4 reply of 1472 bytes", frame: req(cli4, srv4, "Big"), answer: true, path: "answered"},
		{name: "ipv4 header checksum wrong", frame: req(cli4, srv4, "Hello"), raw: func(b []byte) { b[14+10] ^= 0x5a }, path: "bad_ip_csum"},
		// The stack drops a wrong full checksum (XDP leaves it to TC, which
		// passes it); a partial one it takes as it is, so Santa answers.
		{name: "ipv4 UDP checksum wrong", frame: req(cli4, srv4, "Hello"), raw: func(b []byte) { b[14+20+6] ^= 0x5a },
			path: "fallback_checksum", partialPath: "answered", partialAnswer: true},
		{name: "ipv4 destination another host's", frame: req(cli4, addr("10.77.0.200"), "Hello"), path: "not_local"},
		{name: "ipv4 destination another network's", frame: req(cli4, addr("10.99.0.200"), "Hello"), path: "not_local"},
		{name: "ipv4 destination MAC another host's", frame: withMAC(req(cli4, srv4, "Hello"), cliMAC, [6]byte{0x02, 0x99, 0, 0, 0, 7}), path: "not_for_host"},
		{name: "ipv4 broadcast MAC, unicast address", frame: withMAC(req(cli4, srv4, "Hello"), cliMAC, broadcastMAC), path: "not_for_host"},
		{name: "ipv4 broadcast", frame: withMAC(req(cli4, addr("10.77.0.255"), "Hello"), cliMAC, broadcastMAC), path: "not_for_host"},
		{name: "ipv4 subnet broadcast to the host's MAC", frame: req(cli4, addr("10.77.0.255"), "Hello"), path: "not_local"},
		{name: "ipv4 limited broadcast", frame: req(cli4, addr("255.255.255.255"), "Hello"), path: "not_unicast"},
		// Delivered, and left to the application: no reply can go to port
		// 0, and a DNS server drops requests from reflection ports.
		{name: "ipv4 source port 0", frame: fromPort(req(cli4, srv4, "Hello"), 0), keepPort: true, path: "source_port"},
		{name: "ipv4 source port 19 (chargen)", frame: fromPort(req(cli4, srv4, "Hello"), 19), keepPort: true, path: "source_port"},
		{name: "ipv4 group source MAC", frame: withMAC(req(cli4, srv4, "Hello"), [6]byte{0x01, 0, 0x5e, 0, 0, 1}, srvMAC), path: "not_for_host"},
		{name: "ipv4 loopback destination", frame: req(cli4, addr("127.0.0.1"), "Hello"), path: "martian"},
		{name: "ipv4 loopback source", frame: req(addr("127.0.0.1"), srv4, "Hello"), path: "martian"},
		{name: "ipv4 own address as source", frame: req(srv4, srv4, "Hello"), path: "martian"},
		{name: "ipv4 broadcast source", frame: req(addr("10.77.0.255"), srv4, "Hello"), path: "martian"},
		{name: "ipv4 limited broadcast source", frame: req(addr("255.255.255.255"), srv4, "Hello"), path: "not_unicast"},
		{name: "ipv4 this-network source", frame: req(addr("0.1.2.3"), srv4, "Hello"), path: "martian"},
		{name: "ipv4 multicast destination", frame: withMAC(req(cli4, addr("239.1.2.3"), "Hello"), cliMAC, [6]byte{0x01, 0, 0x5e, 1, 2, 3}), path: "not_unicast"},
		{name: "ipv6", frame: req(cli6, srv6, "Hello"), answer: true, path: "answered"},
		{name: "ipv6 link-local", frame: req(linkLocalCli, linkLocalSrv, "Hello"), answer: true, path: "answered"},
		{name: "ipv6 UDP checksum wrong", frame: req(cli6, srv6, "Hello"), raw: func(b []byte) { b[14+40+6] ^= 0x5a },
			path: "fallback_checksum", partialPath: "answered", partialAnswer: true},
		// IPv6 has no "no checksum", partial or not: the stack drops it.
		{name: "ipv6 UDP checksum zero", frame: req(cli6, srv6, "Hello"), raw: func(b []byte) { b[14+40+6], b[14+40+7] = 0, 0 },
			path: "fallback_checksum"},
		{name: "ipv6 reply over the MTU", frame: req(cli6, srv6, "Big"), path: "over_mtu"},
		{name: "ipv6 destination another host's", frame: req(cli6, addr("fd77::77"), "Hello"), path: "not_local"},
		{name: "ipv6 destination another network's", frame: req(cli6, addr("fd99::77"), "Hello"), path: "not_local"},
		{name: "ipv6 destination MAC another host's", frame: withMAC(req(cli6, srv6, "Hello"), cliMAC, [6]byte{0x02, 0x99, 0, 0, 0, 7}), path: "not_for_host"},
		{name: "ipv6 loopback destination", frame: req(cli6, addr("::1"), "Hello"), path: "martian"},
		{name: "ipv6 loopback source", frame: req(addr("::1"), srv6, "Hello"), path: "martian"},
		{name: "ipv6 own address as source", frame: req(srv6, srv6, "Hello"), path: "martian"},
		{name: "ipv6 v4-mapped destination", frame: req(cli6, addr("::ffff:"+serverIPv4), "Hello"), path: "not_local"},
		{name: "ipv6 unspecified source", frame: req(addr("::"), srv6, "Hello"), path: "not_unicast"},
		{name: "ipv6 v4-mapped source", frame: req(addr("::ffff:10.77.0.2"), srv6, "Hello"), path: "martian"},
		{name: "ipv6 link-local of another interface", frame: req(linkLocalCli, addr("fe80::99"), "Hello"), path: "not_local"},
	}
}

func TestDeliveryMatrix(t *testing.T) {
	requireRoot(t)
	r := newRig(t, "d", "--default-offloads")
	attachXDPPass(t, r.cli, r.cliDev)
	app := listenApp(t, r.srv)
	cases := deliveryCases(linkLocal(t, r.srv, r.srvDev, "fe80::77:1"), linkLocal(t, r.cli, r.cliDev, "fe80::77:2"))
	for i := range cases {
		if !cases[i].keepPort {
			cases[i].frame.Src = netip.AddrPortFrom(cases[i].frame.Src.Addr(), uint16(30000+i))
		}
	}

	// Without Santa: what the application receives of each request.
	baseline := map[bool]map[uint16]int{}
	for _, partial := range []bool{false, true} {
		w := openWire(t, r.cli, r.cliDev, partial)
		app.reset()
		for _, c := range cases {
			w.send(t, c.frame, c.raw)
		}
		time.Sleep(matrixWait)
		if got := w.replies(); len(got) > 0 {
			t.Fatalf("replies without Santa: %v", got)
		}
		baseline[partial] = app.received()
	}

	d := attachSanta(t, r, app.conn)
	for _, partial := range []bool{false, true} {
		mode := map[bool]string{false: "full checksums", true: "partial checksums"}[partial]
		w := openWire(t, r.cli, r.cliDev, partial)
		app.reset()
		for _, c := range cases {
			c.frame.PartialUDPCsum = partial
			answer, path := c.outcome(partial)
			before, err := d.PathStats()
			if err != nil {
				t.Fatal(err)
			}
			w.send(t, c.frame, c.raw)
			port := c.frame.Src.Port()
			base := baseline[partial][port]
			// Nothing to wait for where nothing should happen.
			wait := caseDeadline
			if !answer && base == 0 {
				wait = matrixWait
			}
			reply, delivered := waitOutcome(w, app, port, wait)
			after, err := d.PathStats()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case answer && reply == nil:
				t.Errorf("%s, %s: not answered (delivered %d, paths %v)", mode, c.name, delivered, pathDelta(before, after))
			case answer:
				wantFrame := c.frame.Reply(replyFor(c.frame.Payload))
				wantFrame.PartialUDPCsum = reply.partial
				if want := wantFrame.Bytes(); !bytes.Equal(reply.frame, want) {
					t.Errorf("%s, %s: reply\n got %x\nwant %x", mode, c.name, reply.frame, want)
				}
				if base != 1 {
					t.Errorf("%s, %s: answered, but without Santa the application received it %d times", mode, c.name, base)
				}
			case reply != nil:
				t.Errorf("%s, %s: answered %x; the kernel would not deliver it (without Santa: %d)", mode, c.name, reply.frame, base)
			case delivered != base:
				t.Errorf("%s, %s: the application received it %d times, without Santa %d", mode, c.name, delivered, base)
			}
			if after[path] <= before[path] {
				t.Errorf("%s, %s: path %q not counted (paths %v)", mode, c.name, path, pathDelta(before, after))
			}
			// XDP takes every checksum the stack takes, partial ones too.
			if answer && after["fallback_checksum"] != before["fallback_checksum"] {
				t.Errorf("%s, %s: answered, but XDP left it to TC for its checksum", mode, c.name)
			}
			if !answer && after["answered"] != before["answered"] {
				t.Errorf("%s, %s: counted as answered", mode, c.name)
			}
		}
	}
}

// replyFor is what the matrix's rules answer to a request payload.
func replyFor(payload []byte) []byte {
	if string(payload) == "Big" {
		return largestReply
	}
	return []byte("COMSYS")
}

var largestReply = bytes.Repeat([]byte("0123456789abcdef"), rule.MaxUDPReply/16)[:rule.MaxUDPReply]

// attachSanta loads the data plane in the server's namespace (where it
// reads the host's addresses), attaches it to the server's veth and gives
// the application's socket its two rules.
func attachSanta(t *testing.T, r *rig, app *net.UDPConn) *datapath.Datapath {
	t.Helper()
	var d *datapath.Datapath
	err := inNetns(r.srv, func() error {
		var err error
		if d, err = datapath.Open(datapath.Options{NoPin: true, MaxRules: 64, MaxServices: 4}); err != nil {
			return err
		}
		t.Cleanup(func() { d.Close() })
		if _, err := d.Attach(r.srvDev); err != nil {
			return err
		}
		t.Cleanup(func() { d.Detach(r.srvDev) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := app.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var svc model.ServiceID
	var aerr error
	if err := raw.Control(func(fd uintptr) { svc, aerr = d.AddSocket(int(fd)) }); err != nil || aerr != nil {
		t.Fatalf("registering the application's socket: %v %v", err, aerr)
	}
	for _, p := range []string{"Hello", "Big"} {
		reply := replyFor([]byte(p))
		r := rule.Rule{Condition: rule.Condition{Offset: 0, Pattern: []byte(p)},
			Processors: []rule.Processor{rule.Put(0, reply)}, ReplyLen: uint16(len(reply))}
		if _, err := d.AddRule(svc, r); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// matrixApp is the application: a dual-stack socket on every address,
// counting what it receives by the sender's port.
type matrixApp struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  map[uint16]int
}

func listenApp(t *testing.T, ns string) *matrixApp {
	t.Helper()
	a := &matrixApp{got: map[uint16]int{}}
	err := inNetns(ns, func() error {
		var err error
		a.conn, err = net.ListenUDP("udp", &net.UDPAddr{Port: matrixPort})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.conn.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := a.conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			a.mu.Lock()
			a.got[from.Port()]++
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *matrixApp) reset() {
	a.mu.Lock()
	a.got = map[uint16]int{}
	a.mu.Unlock()
}

func (a *matrixApp) received() map[uint16]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[uint16]int, len(a.got))
	for k, v := range a.got {
		out[k] = v
	}
	return out
}

// waitOutcome waits until the request from port is answered or delivered,
// at most wait, then a little longer for anything else it makes happen.
func waitOutcome(w *wire, a *matrixApp, port uint16, wait time.Duration) (reply *received, delivered int) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if w.reply(port) != nil || a.received()[port] > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	return w.reply(port), a.received()[port]
}

func pathDelta(before, after model.PathStats) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range after {
		if v != before[k] {
			out[k] = v - before[k]
		}
	}
	return out
}

// linkLocal gives dev in ns the IPv6 link-local address addr (the rig's
// veths come up too fast for one of their own to be ready).
func linkLocal(t *testing.T, ns, dev, addr string) netip.Addr {
	t.Helper()
	if err := command(t, 10*time.Second, "ip", "-n", ns, "addr", "add", addr+"/64", "dev", dev, "nodad"); err != nil {
		t.Fatal(err)
	}
	return netip.MustParseAddr(addr)
}

// wire sends raw frames on the client's veth and keeps the server's
// replies by their destination port. With partial, frames go out with a
// virtio-net header that leaves the UDP checksum to offload, as a local
// sender's do (CHECKSUM_PARTIAL), and come in with one.
type wire struct {
	fd      int
	ifindex int
	partial bool
	stop    atomic.Bool
	mu      sync.Mutex
	got     map[uint16]received
}

// received is a reply as it came in. A reply with a partial checksum may
// reach the client with it still partial (its virtio-net header says so,
// and the field holds the pseudo header's sum) or completed on the way.
type received struct {
	frame   []byte
	partial bool
}

const vnetHdrLen = 10 // struct virtio_net_hdr

func openWire(t *testing.T, ns, dev string, partial bool) *wire {
	t.Helper()
	w := &wire{partial: partial, got: map[uint16]received{}}
	err := inNetns(ns, func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		w.ifindex = ifc.Index
		proto := int(htons(unix.ETH_P_ALL))
		if w.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if partial {
			if err := unix.SetsockoptInt(w.fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
				return err
			}
		}
		tv := unix.NsecToTimeval((20 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(w.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(w.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: w.ifindex})
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go w.read(done)
	t.Cleanup(func() {
		w.stop.Store(true) // read sees it within its receive timeout
		<-done
		unix.Close(w.fd)
	})
	return w
}

func (w *wire) send(t *testing.T, f pkttest.UDPFrame, change func([]byte)) {
	t.Helper()
	f.PartialUDPCsum = w.partial
	frame := f.Bytes()
	if change != nil {
		change(frame)
	}
	if w.partial {
		hdr := make([]byte, vnetHdrLen)
		hdr[0] = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
		l4 := 14 + 20
		if f.Dst.Addr().Is6() {
			l4 = 14 + 40
		}
		binary.LittleEndian.PutUint16(hdr[6:], uint16(l4)) // csum_start
		binary.LittleEndian.PutUint16(hdr[8:], 6)          // csum_offset
		frame = append(hdr, frame...)
	}
	if err := unix.Sendto(w.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: w.ifindex, Halen: 6}); err != nil {
		t.Fatalf("sending a frame: %v", err)
	}
}

// read keeps every UDP frame from the server's port that comes in.
func (w *wire) read(done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 4096)
	for {
		if w.stop.Load() {
			return
		}
		n, from, err := unix.Recvfrom(w.fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		frame, partial := buf[:n], false
		if w.partial && len(frame) >= vnetHdrLen {
			frame, partial = frame[vnetHdrLen:], frame[0]&1 != 0
		}
		if port, ok := replyPort(frame); ok {
			w.mu.Lock()
			w.got[port] = received{frame: append([]byte(nil), frame...), partial: partial}
			w.mu.Unlock()
		}
	}
}

func (w *wire) reply(port uint16) *received {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.got[port]; ok {
		return &r
	}
	return nil
}

func (w *wire) replies() map[uint16]received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got
}

// replyPort is the destination port of a UDP frame from the matrix's
// server port.
func replyPort(frame []byte) (uint16, bool) {
	if len(frame) < 14 {
		return 0, false
	}
	var udp []byte
	switch binary.BigEndian.Uint16(frame[12:]) {
	case 0x0800:
		if len(frame) < 34+8 || frame[14+9] != 17 {
			return 0, false
		}
		udp = frame[34:]
	case 0x86dd:
		if len(frame) < 54+8 || frame[14+6] != 17 {
			return 0, false
		}
		udp = frame[54:]
	default:
		return 0, false
	}
	if binary.BigEndian.Uint16(udp) != matrixPort {
		return 0, false
	}
	return binary.BigEndian.Uint16(udp[2:]), true
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
