package dnstest_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/dnsload"
	"github.com/santa-offload/santa/internal/dnstest"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/internal/santadtest"
)

// The rig's addresses (bench/rig.sh).
var (
	serverAddrs = []netip.Addr{netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("fd77::1")}
)

const (
	names     = 1000 // in the zone
	asked     = 50   // names the load asks for, in every shape
	perShape  = 10000
	staleness = 10 * time.Millisecond // an old answer in flight as the reload completes
)

// rig brings up a bench/rig.sh rig (NAME-srv and NAME-cli joined by a
// veth, IPv4 and IPv6) for the test; cleanup removes it.
func rig(t *testing.T, suffix string) (srv, cli string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and runs DNS servers")
	}
	santadtest.SweepStale()
	name := santadtest.NetnsName(suffix)
	script, err := filepath.Abs("../../bench/rig.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "down", name).CombinedOutput(); err != nil {
			t.Errorf("rig down: %v\n%s", err, out)
		}
	})
	if out, err := exec.Command("bash", script, "up", name).CombinedOutput(); err != nil {
		t.Fatalf("rig up: %v\n%s", err, out)
	}
	return name + "-srv", name + "-cli"
}

// TestServers: each of BIND (2 threads), Knot (2 UDP workers) and NSD (2
// servers) answers every shape of query over IPv4 and IPv6 exactly as it
// did when the table was captured; a zone change is served completely by
// the time Update returns; a restart changes the pid, and the new pid
// holds the sockets.
func TestServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real DNS servers")
	}
	srvNS, cliNS := rig(t, "dns")
	for _, k := range dnstest.Kinds {
		t.Run(string(k), func(t *testing.T) {
			if err := dnstest.Available(k); err != nil {
				t.Skip(err)
			}
			s, err := dnstest.Start(dnstest.Config{Kind: k, Netns: srvNS, Dir: t.TempDir(), Addrs: serverAddrs,
				Threads: 2, Names: names})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := s.Stop(); err != nil {
					t.Error(err)
				}
			}()
			forms := dnsload.Forms(dnstest.Questions(asked), dnsload.Shapes)
			tables := map[netip.Addr][]dnsload.Expect{}
			for _, a := range serverAddrs {
				tables[a] = capture(t, cliNS, a, forms)
				load(t, cliNS, a, forms, tables[a], perShape*len(dnsload.Shapes))
			}
			change(t, s, cliNS, forms, tables[serverAddrs[0]])
			restart(t, s, srvNS, cliNS, forms)
		})
	}
}

// capture is the server's reply to each form, asked from the client.
func capture(t *testing.T, cliNS string, a netip.Addr, forms []dnsload.Form) []dnsload.Expect {
	t.Helper()
	conn, err := dnsload.Dial(cliNS, netip.AddrPortFrom(a, 53))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	table, err := dnsload.Capture(conn, forms, 4)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// load sends count uniformly drawn forms to a and wants every reply right.
func load(t *testing.T, cliNS string, a netip.Addr, forms []dnsload.Form, table []dnsload.Expect, count int) {
	t.Helper()
	res, err := dnsload.Run(context.Background(), dnsload.Config{Netns: cliNS, Server: netip.AddrPortFrom(a, 53),
		Forms: forms, Expect: table, Count: count, Duration: 30 * time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %d replies in %v", a, res.Replies, res.Elapsed.Round(time.Millisecond))
	if res.Replies != count || res.Mismatches+res.Unexpected+res.Timeouts != 0 {
		t.Errorf("%v: %s", a, res.Report(forms))
	}
}

// change edits n1's address while a load runs: replies are the old data
// up to the reload's completion and the new data after it.
func change(t *testing.T, s *dnstest.Server, cliNS string, forms []dnsload.Form, table []dnsload.Expect) {
	t.Helper()
	a := serverAddrs[0]
	l, err := dnsload.Start(context.Background(), dnsload.Config{Netns: cliNS, Server: netip.AddrPortFrom(a, 53),
		Forms: forms, Expect: table, Count: 1 << 30, Duration: 2 * time.Second, StaleAfter: staleness, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	l.BeginChange()
	t0 := time.Now()
	done, err := s.Update(dnstest.Origin, func(z *dnstest.Zone) { z.Set("n1", "A", "10.99.99.99") })
	if err != nil {
		t.Fatal(err)
	}
	conn, err := s.Dial(a)
	if err != nil {
		t.Fatal(err)
	}
	next, err := dnsload.Capture(conn, forms, 2)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.EndChange(next, done); err != nil {
		t.Fatal(err)
	}
	res, err := l.Wait()
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for i := range forms {
		if !next[i].Equal(table[i]) {
			changed++
		}
	}
	t.Logf("reload took %v; %d forms changed; %d old replies, the last %v after the reload was complete",
		done.Sub(t0).Round(time.Millisecond), changed, res.OldReplies, res.LastOld.Sub(done))
	// n1 in its 8 shapes, and both SOA queries in 8 shapes, the SOA of the
	// sub zone (NXDOMAIN and its authority SOA... ) unchanged.
	if changed == 0 || res.Mismatches+res.Stale+res.Unexpected+res.Timeouts != 0 {
		t.Errorf("zone change: %d forms changed; %s", changed, res.Report(forms))
	}
}

// restart restarts the server: a new pid, which holds the sockets on port
// 53, and the same answers.
func restart(t *testing.T, s *dnstest.Server, srvNS, cliNS string, forms []dnsload.Form) {
	t.Helper()
	before := s.Pid()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Pid() == before {
		t.Errorf("pid %d unchanged by the restart", before)
	}
	for _, a := range serverAddrs {
		bound, err := procsock.BoundUDP(netns.Named(srvNS), 53, a)
		if err != nil || len(bound) == 0 {
			t.Fatalf("sockets on %v port 53: %v, %v", a, bound, err)
		}
		for _, b := range bound {
			pid, _, err := procsock.Holder(b.Inode)
			if err != nil || !slices.Contains(s.Pids(), pid) {
				t.Errorf("socket on %v held by %d (%v), not by the server's %v", a, pid, err, s.Pids())
			}
		}
		table := capture(t, cliNS, a, forms)
		load(t, cliNS, a, forms, table, 1000)
	}
	if strings.Contains(s.Log(), "panic") {
		t.Errorf("server log:\n%s", s.Log())
	}
}

// TestKnotXDP: Knot in its XDP mode on the server veth answers the client
// through AF_XDP (its program attached; Start checks native mode; no
// query reaches the stack), every reply equal to what its own socket
// answers in the server namespace; Stop detaches the program Knot leaves
// behind; other servers have no XDP mode.
func TestKnotXDP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Knot")
	}
	if err := dnstest.Available(dnstest.Knot); err != nil {
		t.Skip(err)
	}
	srvNS, cliNS := rig(t, "kxdp")
	dev := strings.TrimSuffix(srvNS, "-srv") + "-s"
	s, err := dnstest.Start(dnstest.Config{Kind: dnstest.Knot, Netns: srvNS, Dir: t.TempDir(), Addrs: serverAddrs,
		Names: names, XDP: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if !xdpAttached(t, srvNS, dev) {
		t.Fatalf("no XDP program on %s while Knot runs in XDP mode", dev)
	}
	forms := dnsload.Forms(dnstest.Questions(asked), []dnsload.Shape{dnsload.RD, dnsload.EDNS, dnsload.RDAD})
	for _, a := range serverAddrs {
		conn, err := s.Dial(a) // the socket's answers: lo, no XDP
		if err != nil {
			t.Fatal(err)
		}
		table, err := dnsload.Capture(conn, forms, 2)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		before := udpInDatagrams(t, srvNS)
		load(t, cliNS, a, forms, table, 10*len(forms))
		if n := udpInDatagrams(t, srvNS) - before; n > 0 {
			t.Errorf("%v: %d datagrams reached the server namespace's UDP stack: Knot's XDP mode did not answer them", a, n)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if xdpAttached(t, srvNS, dev) {
		t.Errorf("Knot's XDP program still on %s after Stop", dev)
	}
	if _, err := dnstest.Start(dnstest.Config{Kind: dnstest.BIND, Netns: srvNS, Dir: t.TempDir(), Addrs: serverAddrs,
		XDP: dev}); err == nil || !strings.Contains(err.Error(), "XDP mode is Knot's") {
		t.Errorf("BIND in XDP mode: %v, want a refusal", err)
	}
}

// udpInDatagrams is the UDP datagrams (IPv4 and IPv6) ns's stack has
// delivered to sockets.
func udpInDatagrams(t *testing.T, ns string) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp", "/proc/net/snmp6").CombinedOutput()
	if err != nil {
		t.Fatalf("reading %s's UDP counters: %v\n%s", ns, err, out)
	}
	sum := 0
	var header []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "Udp6InDatagrams":
			n, _ := strconv.Atoi(f[1])
			sum += n
		case len(f) > 1 && f[0] == "Udp:" && header == nil:
			header = f
		case len(f) > 1 && f[0] == "Udp:":
			for i := range f {
				if header[i] == "InDatagrams" {
					n, _ := strconv.Atoi(f[i])
					sum += n
				}
			}
		}
	}
	return sum
}

// xdpAttached reports whether dev in ns has an XDP program.
func xdpAttached(t *testing.T, ns, dev string) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "link", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show %s: %v\n%s", dev, err, out)
	}
	return strings.Contains(string(out), "prog/xdp")
}
