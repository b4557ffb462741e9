package integration

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/bench/mcitems"
	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/netproc"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/internal/udpask"
	"github.com/santa-offload/santa/rule"
	"golang.org/x/sys/unix"
)

// localMcKeys are stored, one rule each; localRequests GETs ask them in
// turn. memcached listens on mcPort (mcagent_test.go).
const localMcKeys = 100

// TestLocalClientsMemcached: Debian's memcached, with a rule per key on
// its UDP socket (the GET from byte 2 on; memcached's reply with the
// request id copied, as bench/memcached builds them), asked by local
// clients: over a veth with its default offloads whose peer has GRO, XDP
// answers the partial requests (and full ones); over loopback, generic
// XDP cannot vouch for a partial checksum and TC answers, while a full
// checksum (a corked sender's) is answered in XDP. Every GET of a
// windowed load gets memcached's own reply, byte for byte, the counters
// say which program answered, and memcached itself sees none of them.
func TestLocalClientsMemcached(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Fatal("memcached is not installed (make test-deps)")
	}
	n := uint64(localRequests)

	t.Run("veth, peer with GRO", func(t *testing.T) {
		r := newRig(t, "mg", "--default-offloads")
		requireTxChecksum(t, r)
		if err := command(t, 10*time.Second, "ip", "netns", "exec", r.cli, "ethtool", "-K", r.cliDev, "gro", "on"); err != nil {
			t.Fatal(err)
		}
		m := startMemcached(t, r.srv, r.cli, netip.MustParseAddr(serverIPv4))
		m.offload(t, r.srvDev)
		m.ask(t, r.cli, false)
		if err := command(t, 10*time.Second, "ip", "netns", "exec", r.cli, "ethtool", "-K", r.cliDev, "tx", "off"); err != nil {
			t.Fatal(err)
		}
		m.ask(t, r.cli, false)
		m.wantCounters(t, model.ServiceStats{Matched: 2 * n}, map[string]uint64{"answered": 2 * n,
			"fallback_checksum": 0, "fallback_too_long": 0, "fallback_no_xdp_tx": 0})
	})

	t.Run("loopback", func(t *testing.T) {
		ns := newNetns(t, "mo")
		m := startMemcached(t, ns, ns, netip.MustParseAddr("127.0.0.1"))
		m.offload(t, "lo")
		// The few partial checksums that also verify as full ones are
		// answered in XDP (partialVerifies).
		tc := n - m.ask(t, ns, false)
		t.Logf("%d of %d partial checksums verified as full ones", n-tc, n)
		m.wantCounters(t, model.ServiceStats{Matched: n, TCChecksum: tc}, map[string]uint64{"answered": n,
			"fallback_checksum": tc})
		m.ask(t, ns, true)
		m.wantCounters(t, model.ServiceStats{Matched: 2 * n, TCChecksum: tc}, map[string]uint64{"answered": 2 * n,
			"fallback_checksum": tc})
		// And one such request on purpose: XDP answers it, TC never sees it.
		m.askVerifying(t, ns)
		m.wantCounters(t, model.ServiceStats{Matched: 2*n + 1, TCChecksum: tc}, map[string]uint64{"answered": 2*n + 1,
			"fallback_checksum": tc})
		// A raw socket's GET is sent as written (CHECKSUM_NONE): with its
		// checksum right, XDP answers it; with it wrong, the stack would
		// drop it, and so neither Santa nor memcached answers.
		m.askRaw(t, true)
		m.askRaw(t, false)
		m.wantCounters(t, model.ServiceStats{Matched: 2*n + 2, TCChecksum: tc, BadCsum: 1},
			map[string]uint64{"answered": 2*n + 2, "fallback_checksum": tc + 1})
	})
}

// localMemcached is memcached in a namespace, its keys stored, and the
// data plane answering its GETs.
type localMemcached struct {
	ns      string
	at      netip.AddrPort
	replies [][]byte // key i's, request id 0
	gets    uint64   // memcached's cmd_get after capturing the replies
	d       *datapath.Datapath
	svc     model.ServiceID
}

// startMemcached runs memcached in ns on addr, stores localMcKeys keys from
// clientNS and captures its replies; cleanup stops it.
func startMemcached(t *testing.T, ns, clientNS string, addr netip.Addr) *localMemcached {
	t.Helper()
	m := &localMemcached{ns: ns, at: netip.AddrPortFrom(addr, mcPort)}
	port := strconv.Itoa(mcPort)
	var conn net.Conn
	proc, err := netproc.Start(netproc.Spec{Name: "memcached", Netns: ns, LogPath: t.TempDir() + "/memcached.log",
		Argv: []string{"memcached", "-u", "root", "-l", addr.String(), "-p", port, "-U", port, "-t", "1", "-m", "16", "-c", "64"},
		Ready: func() (err error) {
			return inNetns(clientNS, func() error {
				conn, err = net.DialTimeout("tcp", m.at.String(), time.Second)
				return err
			})
		}})
	if conn != nil {
		t.Cleanup(func() { conn.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Stop() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := mcitems.Store(conn, localMcKeys); err != nil {
		t.Fatal(err)
	}
	items := make([]int, localMcKeys)
	for i := range items {
		items[i] = i
	}
	if m.replies, err = udpask.Replies(dialIn(t, clientNS, m.at.String()), mcitems.Request, items); err != nil {
		t.Fatal(err)
	}
	for i, reply := range m.replies {
		if err := mcitems.CheckReply(i, reply); err != nil {
			t.Fatal(err)
		}
	}
	m.gets = cmdGets(t, conn)
	t.Cleanup(func() {
		if got := cmdGets(t, conn); got != m.gets {
			t.Errorf("memcached served %d GETs that Santa should have answered", got-m.gets)
		}
	})
	return m
}

// cmdGets is memcached's count of GET commands so far (its "stats").
func cmdGets(t *testing.T, conn net.Conn) uint64 {
	t.Helper()
	if _, err := conn.Write([]byte("stats\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var gets uint64
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("memcached's stats: %v", err)
		}
		if line == "END\r\n" {
			return gets
		}
		if v, ok := strings.CutPrefix(line, "STAT cmd_get "); ok {
			gets, _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
}

// offload registers memcached's UDP socket with a data plane in its
// namespace, gives it a rule per key and attaches it to dev.
func (m *localMemcached) offload(t *testing.T, dev string) {
	t.Helper()
	bound, err := procsock.BoundUDP(netns.Named(m.ns), mcPort, m.at.Addr())
	if err != nil || len(bound) != 1 {
		t.Fatalf("memcached's UDP sockets on %v: %v, %v", m.at, bound, err)
	}
	pid, n, err := procsock.Holder(bound[0].Inode)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := procsock.TakeFD(pid, n)
	if err != nil {
		t.Fatal(err)
	}
	err = inNetns(m.ns, func() error {
		d, err := datapath.Open(datapath.Options{NoPin: true, MaxRules: 4 * localMcKeys, MaxServices: 4})
		if err != nil {
			return err
		}
		m.d = d
		t.Cleanup(func() { d.Close() })
		if m.svc, err = d.AddSocket(fd); err != nil {
			return err
		}
		rules := make([]rule.Rule, localMcKeys)
		for i := range rules {
			rules[i] = scenario.Rule(mcitems.Request, i, m.replies[i])
		}
		if _, err := d.AddRules(m.svc, rules); err != nil {
			return err
		}
		if _, err := d.Attach(dev); err != nil {
			return err
		}
		t.Cleanup(func() { d.Detach(dev) })
		return nil
	})
	unix.Close(fd) // the service keeps the socket's cookie, not the fd
	if err != nil {
		t.Fatal(err)
	}
}

// ask GETs the keys in turn localRequests times from clientNS, with at
// most localWindow outstanding (told apart by their request ids), and
// fails unless every GET gets memcached's reply with its id, byte for
// byte, within replyTimeout. full: every request is sent with a full UDP
// checksum (udpask.WriteFullChecksum), else as the device sends it. It
// returns how many of the requests sent as the device sends them would
// pass as full checksums were they partial ones (partialVerifies).
func (m *localMemcached) ask(t *testing.T, clientNS string, full bool) (verifies uint64) {
	t.Helper()
	conn := dialIn(t, clientNS, m.at.String())
	buf := make([]byte, 65536)
	sent, got := 0, 0
	for got < localRequests {
		for sent < localRequests && sent-got < localWindow {
			req := mcitems.Request(uint16(sent), sent%localMcKeys)
			var err error
			if full {
				err = udpask.WriteFullChecksum(conn, req)
			} else {
				_, err = conn.Write(req)
				if partialVerifiesConn(conn, req) {
					verifies++
				}
			}
			if err != nil {
				t.Fatalf("sending GET %d: %v", sent, err)
			}
			sent++
		}
		if err := conn.SetReadDeadline(time.Now().Add(replyTimeout)); err != nil {
			t.Fatal(err)
		}
		k, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("%d of %d GETs to %v answered, then: %v", got, localRequests, m.at, err)
		}
		id := binary.BigEndian.Uint16(buf)
		want := bytes.Clone(m.replies[int(id)%localMcKeys])
		binary.BigEndian.PutUint16(want, id)
		if int(id) >= sent || !bytes.Equal(buf[:k], want) {
			t.Fatalf("reply %d: %q, want %q (request id %d)", got, abbrev(buf[:k]), abbrev(want), id)
		}
		got++
	}
	return verifies
}

// askVerifying sends key 0's GET from clientNS with the one request id
// whose partial checksum verifies as a full one (partialVerifies), and
// checks memcached's reply comes back.
func (m *localMemcached) askVerifying(t *testing.T, clientNS string) {
	t.Helper()
	conn := dialIn(t, clientNS, m.at.String())
	id := 0
	for ; id <= 0xffff && !partialVerifiesConn(conn, mcitems.Request(uint16(id), 0)); id++ {
	}
	if id > 0xffff {
		t.Fatalf("no request id gives a partial checksum that verifies from %v", conn.LocalAddr())
	}
	if _, err := conn.Write(mcitems.Request(uint16(id), 0)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(replyTimeout))
	buf := make([]byte, 65536)
	k, err := conn.Read(buf)
	want := bytes.Clone(m.replies[0])
	binary.BigEndian.PutUint16(want, uint16(id))
	if err != nil || !bytes.Equal(buf[:k], want) {
		t.Fatalf("GET with request id %d: reply %q, %v; want %q", id, abbrev(buf[:k]), err, abbrev(want))
	}
}

// wantCounters checks the service's counters and the data plane's path
// counters (those named) against want.
func (m *localMemcached) wantCounters(t *testing.T, want model.ServiceStats, paths map[string]uint64) {
	t.Helper()
	st, err := m.d.ServiceStats(m.svc)
	if err != nil {
		t.Fatal(err)
	}
	if st.Matched != want.Matched || st.TCChecksum != want.TCChecksum || st.TCTooLong != want.TCTooLong ||
		st.TCNoXDP != want.TCNoXDP || st.BadCsum != want.BadCsum {
		t.Errorf("service counters %+v, want %+v", st, want)
	}
	got, err := m.d.PathStats()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range paths {
		if got[k] != v {
			t.Errorf("path %s = %d, want %d (all: %v)", k, got[k], v, fmt.Sprint(got))
		}
	}
}

// askRaw sends key 0's GET from a raw socket over loopback, its UDP
// checksum right or wrong, and checks that memcached's reply comes back
// exactly when the checksum is right.
func (m *localMemcached) askRaw(t *testing.T, goodChecksum bool) {
	t.Helper()
	var client *net.UDPConn
	var fd int
	err := inNetns(m.ns, func() (err error) {
		if client, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer unix.Close(fd)
	const id = 7
	payload := mcitems.Request(id, 0)
	udp := binary.BigEndian.AppendUint16(nil, uint16(client.LocalAddr().(*net.UDPAddr).Port))
	udp = binary.BigEndian.AppendUint16(udp, mcPort)
	udp = binary.BigEndian.AppendUint16(udp, uint16(8+len(payload)))
	udp = append(udp, 0, 0)
	udp = append(udp, payload...)
	pseudo := append([]byte{127, 0, 0, 1, 127, 0, 0, 1, 0, unix.IPPROTO_UDP}, udp[4:6]...)
	check := ^pkttest.OnesSum(append(pseudo, udp...))
	if !goodChecksum {
		if check++; check == 0 || check == 0xffff {
			check = 0x1234
		}
	}
	binary.BigEndian.PutUint16(udp[6:], check)
	if err := unix.Sendto(fd, udp, 0, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	wait := replyTimeout
	if !goodChecksum {
		wait = 300 * time.Millisecond // time enough for either to answer
	}
	client.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65536)
	k, err := client.Read(buf)
	want := bytes.Clone(m.replies[0])
	binary.BigEndian.PutUint16(want, id)
	switch {
	case goodChecksum && (err != nil || !bytes.Equal(buf[:k], want)):
		t.Fatalf("raw GET with a right checksum: reply %q, %v; want %q", abbrev(buf[:k]), err, abbrev(want))
	case !goodChecksum && err == nil:
		t.Fatalf("raw GET with a wrong checksum, which the stack drops, was answered: %q", abbrev(buf[:k]))
	}
}
