package integration

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"
)

// A client on the same host sends with the TX checksum offload of a veth
// with its default offloads, or of loopback: its requests carry partial UDP
// checksums. Every one must be answered, byte for byte, by the path the
// counters name (docs/architecture.md, "Local clients: veth and loopback").
const (
	localRequests = 2000 // per address family
	localWindow   = 64   // outstanding at most, as a closed-loop client
)

// TestLocalClients: over a veth with its default offloads whose peer has
// NAPI (GRO on, as a container's with threaded NAPI), XDP answers the
// partial requests itself (and full ones) and TC only the reply too long
// for the XDP frame; over one whose peer has neither XDP nor GRO (every veth's
// default), XDP cannot send to the peer and TC answers everything; over
// loopback, generic XDP cannot vouch for a partial checksum and TC
// answers.
func TestLocalClients(t *testing.T) {
	requireRoot(t)
	bin := buildHello(t)
	servers := []string{net.JoinHostPort(serverIPv4, "7777"), net.JoinHostPort(serverIPv6, "7777")}
	const bigs = 2 * k // "Big": too long for veth's XDP frame

	t.Run("veth, peer with GRO", func(t *testing.T) {
		r := newRig(t, "g", "--default-offloads")
		requireTxChecksum(t, r)
		if err := command(t, 10*time.Second, "ip", "netns", "exec", r.cli, "ethtool", "-K", r.cliDev, "gro", "on"); err != nil {
			t.Fatal(err)
		}
		h := startHello(t, bin, r.srv, "-iface", r.srvDev, "-big")
		for _, server := range servers {
			conn := dialIn(t, r.cli, server)
			askWindowed(t, conn, []byte("Hello"), []byte("COMSYS"), localRequests)
			askWindowed(t, conn, []byte("Big"), bigReply(), k)
		}
		// Full checksums too: XDP_TX would leave these replies in the
		// peer's ring, which only an XDP program of its own wakes up.
		if err := command(t, 10*time.Second, "ip", "netns", "exec", r.cli, "ethtool", "-K", r.cliDev, "tx", "off"); err != nil {
			t.Fatal(err)
		}
		for _, server := range servers {
			askWindowed(t, dialIn(t, r.cli, server), []byte("Hello"), []byte("COMSYS"), localRequests)
		}
		stats := h.stop(t)
		t.Logf("hello: %s", statsLine(h))
		n := uint64(4*localRequests + bigs)
		wantStats(t, stats, map[string]uint64{"kernel_answered": n, "app_answered": 0, "hello_hits": 4 * localRequests,
			"big_hits": bigs, "fallback": bigs, "tc_checksum": 0, "tc_too_long": bigs, "tc_no_xdp": 0,
			"path_answered": n, "path_fallback_checksum": 0, "path_fallback_too_long": bigs, "path_fallback_no_xdp_tx": 0})
	})

	t.Run("veth, peer without NAPI", func(t *testing.T) {
		r := newRig(t, "n", "--default-offloads")
		requireTxChecksum(t, r)
		h := startHello(t, bin, r.srv, "-iface", r.srvDev)
		for _, server := range servers {
			askWindowed(t, dialIn(t, r.cli, server), []byte("Hello"), []byte("COMSYS"), localRequests)
		}
		stats := h.stop(t)
		t.Logf("hello: %s", statsLine(h))
		n := uint64(2 * localRequests)
		wantStats(t, stats, map[string]uint64{"kernel_answered": n, "app_answered": 0, "hello_hits": n,
			"fallback": n, "tc_checksum": 0, "tc_too_long": 0, "tc_no_xdp": n,
			"path_answered": n, "path_fallback_checksum": 0, "path_fallback_no_xdp_tx": n})
	})

	t.Run("loopback", func(t *testing.T) {
		ns := newNetns(t, "o")
		h := startHello(t, bin, ns, "-iface", "lo")
		mode := h.xdpMode("lo")
		// A connection's requests are all alike: if their partial
		// checksum verifies as a full one (partialVerifies, one port in
		// 65,536), generic XDP answers every one of them.
		var inXDP uint64
		for _, server := range []string{"127.0.0.1:7777", "[::1]:7777"} {
			conn := dialIn(t, ns, server)
			if mode == "generic" && partialVerifiesConn(conn, []byte("Hello")) {
				inXDP += localRequests
			}
			askWindowed(t, conn, []byte("Hello"), []byte("COMSYS"), localRequests)
		}
		stats := h.stop(t)
		t.Logf("XDP mode on lo: %s; hello: %s", mode, statsLine(h))
		n := uint64(2 * localRequests)
		want := map[string]uint64{"kernel_answered": n, "app_answered": 0, "hello_hits": n, "fallback": n - inXDP,
			"path_answered": n}
		// Generic XDP sees the partial checksum it has no skb to vouch
		// for; without XDP, TC alone sees the requests.
		if mode == "generic" {
			want["tc_checksum"], want["path_fallback_checksum"] = n-inXDP, n-inXDP
		} else {
			want["tc_no_xdp"] = n
		}
		wantStats(t, stats, want)
	})
}

// requireTxChecksum fails unless the client's veth offloads its TX
// checksums: else its requests would carry full checksums, and the test
// would not test what it says.
func requireTxChecksum(t *testing.T, r *rig) {
	t.Helper()
	out, err := commandOutput(t, 10*time.Second, "ip", "netns", "exec", r.cli, "ethtool", "-k", r.cliDev)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "tx-checksumming: on") {
		t.Fatalf("%s's TX checksum offload is off:\n%s", r.cliDev, out)
	}
}

// askWindowed sends req n times over conn with at most localWindow
// outstanding, and fails unless every one is answered with want, byte for
// byte, within replyTimeout.
func askWindowed(t *testing.T, conn *net.UDPConn, req, want []byte, n int) {
	t.Helper()
	buf := make([]byte, 65536)
	sent, got := 0, 0
	for got < n {
		for sent < n && sent-got < localWindow {
			if _, err := conn.Write(req); err != nil {
				t.Fatalf("sending %q: %v", abbrev(req), err)
			}
			sent++
		}
		if err := conn.SetReadDeadline(time.Now().Add(replyTimeout)); err != nil {
			t.Fatal(err)
		}
		m, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("%d of %d requests %q to %s answered, then: %v", got, n, abbrev(req), conn.RemoteAddr(), err)
		}
		if !bytes.Equal(buf[:m], want) {
			t.Fatalf("reply %d to %q: %q, want %q", got, abbrev(req), abbrev(buf[:m]), abbrev(want))
		}
		got++
	}
}
