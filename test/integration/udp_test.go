package integration

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
)

// k is how many requests of each kind a test sends.
const k = 5

// bigReply is what hello -big answers to "Big": 1400 bytes "ABC...Z" repeated.
func bigReply() []byte {
	b := make([]byte, 1400)
	for i := range b {
		b[i] = 'A' + byte(i%26)
	}
	return b
}

// TestUDPOverRig: the kernel answers "Hello" in native XDP on the server's
// veth, over IPv4 and IPv6, and hello answers (and sees) only the rest.
func TestUDPOverRig(t *testing.T) {
	requireRoot(t)
	bin := buildHello(t)
	r := newRig(t, "u")
	attachXDPPass(t, r.cli, r.cliDev)

	for _, tc := range []struct{ name, server string }{
		{"IPv4", net.JoinHostPort(serverIPv4, "7777")},
		{"IPv6", net.JoinHostPort(serverIPv6, "7777")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHello(t, bin, r.srv, "-iface", r.srvDev)
			mode := h.xdpMode(r.srvDev)
			t.Logf("XDP mode on %s: %s", r.srvDev, mode)
			if mode != "native" {
				t.Errorf("XDP mode on %s is %q, want native", r.srvDev, mode)
			}

			conn := dialIn(t, r.cli, tc.server)
			for i := range k {
				if got := exchange(t, conn, []byte("Hello")); string(got) != "COMSYS" {
					t.Errorf("reply to \"Hello\" = %q, want \"COMSYS\"", got)
				}
				req := fmt.Sprintf("Hi there #%d", i)
				if got, want := exchange(t, conn, []byte(req)), "you said: "+req; string(got) != want {
					t.Errorf("reply to %q = %q, want %q", req, got, want)
				}
			}

			stats := h.stop(t)
			t.Logf("hello: %s", statsLine(h))
			reqs := h.requests()
			for _, line := range reqs {
				if strings.Contains(line, "Hello") {
					t.Errorf("hello saw a request the kernel should have answered: %s", line)
				}
			}
			if len(reqs) != k {
				t.Errorf("hello logged %d requests, want %d\n%s", len(reqs), k, h.output())
			}
			// No fallback: native XDP itself answered every "Hello".
			wantStats(t, stats, map[string]uint64{"kernel_answered": k, "app_answered": k,
				"hello_hits": k, "fallback": 0, "bad_csum": 0})
		})
	}
}

// TestTCFallback: a 1400-byte reply does not fit the frame native XDP on
// veth can grow, so XDP leaves the matched request to TC, which answers it.
func TestTCFallback(t *testing.T) {
	requireRoot(t)
	bin := buildHello(t)
	r := newRig(t, "f")
	attachXDPPass(t, r.cli, r.cliDev)
	h := startHello(t, bin, r.srv, "-iface", r.srvDev, "-big")
	t.Logf("XDP mode on %s: %s", r.srvDev, h.xdpMode(r.srvDev))

	want := bigReply()
	for _, server := range []string{net.JoinHostPort(serverIPv4, "7777"), net.JoinHostPort(serverIPv6, "7777")} {
		conn := dialIn(t, r.cli, server)
		for range k {
			if got := exchange(t, conn, []byte("Big")); !bytes.Equal(got, want) {
				t.Errorf("reply to \"Big\" via %s: %d bytes %q, want %d bytes %q",
					server, len(got), abbrev(got), len(want), abbrev(want))
			}
		}
	}

	stats := h.stop(t)
	t.Logf("hello: %s", statsLine(h))
	if reqs := h.requests(); len(reqs) != 0 {
		t.Errorf("hello saw requests the kernel should have answered:\n%s", strings.Join(reqs, "\n"))
	}
	wantStats(t, stats, map[string]uint64{"kernel_answered": 2 * k, "fallback": 2 * k,
		"big_hits": 2 * k, "app_answered": 0, "bad_csum": 0})
}

// TestLoopback: on lo, which has no native XDP, the kernel still answers
// (generic XDP or TC) a client in the same namespace.
func TestLoopback(t *testing.T) {
	requireRoot(t)
	bin := buildHello(t)
	ns := newNetns(t, "l")
	h := startHello(t, bin, ns, "-iface", "lo")
	t.Logf("XDP mode on lo: %s", h.xdpMode("lo"))

	for _, server := range []string{"127.0.0.1:7777", "[::1]:7777"} {
		conn := dialIn(t, ns, server)
		for i := range k {
			if got := exchange(t, conn, []byte("Hello")); string(got) != "COMSYS" {
				t.Errorf("reply to \"Hello\" via %s = %q, want \"COMSYS\"", server, got)
			}
			req := fmt.Sprintf("Hi there #%d", i)
			if got, want := exchange(t, conn, []byte(req)), "you said: "+req; string(got) != want {
				t.Errorf("reply to %q via %s = %q, want %q", req, server, got, want)
			}
		}
	}

	stats := h.stop(t)
	t.Logf("hello: %s", statsLine(h))
	for _, line := range h.requests() {
		if strings.Contains(line, "Hello") {
			t.Errorf("hello saw a request the kernel should have answered: %s", line)
		}
	}
	wantStats(t, stats, map[string]uint64{"kernel_answered": 2 * k, "app_answered": 2 * k, "hello_hits": 2 * k})
}

func statsLine(h *hello) string {
	for _, line := range h.stdout() {
		if strings.HasPrefix(line, "STATS ") {
			return line
		}
	}
	return "(no STATS line)"
}
