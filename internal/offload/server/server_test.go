package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/santadtest"
)

const helperEnv = "SANTA_OFFLOAD_SERVER_HELPER" // runHelper's mode

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode, os.Getenv("HELPER_NETNS"), os.Getenv("HELPER_PORT")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper binds, in the namespace at ns, what a DNS server binds (mode
// "server": two SO_REUSEPORT sockets on 0.0.0.0:port, one on [::1]:port,
// and an outgoing query socket on a random port), another process on the
// same port (mode "other": 127.0.0.2:port; mode "nobody": 127.0.0.3:port,
// then running as uid and gid 65534; mode "drops": 127.0.0.4:port, and
// becomes uid and gid 65534 when it reads a line, saying "dropped"), or
// memcached (mode "memcached": UDP on port, a TCP listener on port+1 and
// a connection of its), says "ready" and holds them until its stdin
// closes.
func runHelper(mode, ns, portText string) error {
	port, _ := strconv.Atoi(portText)
	reuse := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return err
	}}
	var conns []net.PacketConn
	var held []io.Closer
	err := netns.Run(ns, func() error {
		binds := [][2]string{{"udp4", fmt.Sprintf("0.0.0.0:%d", port)}, {"udp4", fmt.Sprintf("0.0.0.0:%d", port)},
			{"udp6", fmt.Sprintf("[::1]:%d", port)}, {"udp4", "127.0.0.1:0"}}
		switch mode {
		case "other":
			binds = [][2]string{{"udp4", fmt.Sprintf("127.0.0.2:%d", port)}}
		case "nobody":
			binds = [][2]string{{"udp4", fmt.Sprintf("127.0.0.3:%d", port)}}
		case "drops":
			binds = [][2]string{{"udp4", fmt.Sprintf("127.0.0.4:%d", port)}}
		case "memcached":
			// A UDP socket, and a TCP listener on the next port with a
			// connection it accepted: only the listener is a listener.
			binds = [][2]string{{"udp4", fmt.Sprintf("127.0.0.1:%d", port)}}
			l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port+1))
			if err != nil {
				return err
			}
			c, err := net.Dial("tcp4", l.Addr().String())
			if err != nil {
				return err
			}
			a, err := l.Accept()
			if err != nil {
				return err
			}
			held = append(held, l, c, a) // until the helper exits
		}
		for _, b := range binds {
			c, err := reuse.ListenPacket(context.Background(), b[0], b[1])
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if mode == "nobody" {
		if err := becomeNobody(); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	if mode == "drops" {
		if _, err := in.ReadString('\n'); err != nil {
			return nil // stopped before it was asked to
		}
		if err := becomeNobody(); err != nil {
			return err
		}
		fmt.Println("dropped")
	}
	io.Copy(io.Discard, in)
	for _, c := range held {
		c.Close()
	}
	return nil
}

// becomeNobody makes this process uid and gid 65534.
func becomeNobody() error {
	// syscall's, not unix's: they change every thread.
	if err := syscall.Setgroups(nil); err != nil {
		return err
	}
	if err := syscall.Setresgid(65534, 65534, 65534); err != nil {
		return err
	}
	return syscall.Setresuid(65534, 65534, 65534)
}

// helper is a running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startHelper(t *testing.T, mode, ns string, port int, cgroup string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "HELPER_NETNS="+ns, "HELPER_PORT="+strconv.Itoa(port))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(h.stop)
	if line, err := h.out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("helper %s: %q, %v", mode, line, err)
	}
	if cgroup != "" {
		if err := os.WriteFile(filepath.Join(cgroup, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *helper) pid() int { return h.cmd.Process.Pid }

// drop has a "drops" helper become uid 65534.
func (h *helper) drop(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(h.stdin, "drop\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := h.out.ReadString('\n'); err != nil || line != "dropped\n" {
		t.Fatalf("helper drops: %q, %v", line, err)
	}
}

// stop ends the helper and waits for it: its sockets are closed then.
func (h *helper) stop() {
	if h.cmd.ProcessState == nil {
		h.stdin.Close()
		h.cmd.Wait()
	}
}

// found is what a scan found: local addresses, sorted, and the holders.
func found(t *testing.T, f *Finder, known map[uint64]bool) (live map[uint64]bool, addrs []string, holders map[int]bool, inodes map[uint64]bool) {
	t.Helper()
	live, fresh, err := f.Scan(known)
	if err != nil {
		t.Fatal(err)
	}
	holders, inodes = map[int]bool{}, map[uint64]bool{}
	for _, s := range fresh {
		addrs = append(addrs, s.Local.String())
		holders[s.Holder.PID] = true
		inodes[s.Inode] = true
		fd, err := f.Take(s)
		if err != nil {
			t.Fatalf("Take(%+v): %v", s, err)
		}
		sa, err := unix.Getsockname(fd)
		unix.Close(fd)
		if err != nil || sockaddrPort(sa) != s.Local.Port() {
			t.Fatalf("took fd bound to %v, %v; want %v", sa, err, s.Local)
		}
	}
	slices.Sort(addrs)
	return live, addrs, holders, inodes
}

func sockaddrPort(sa unix.Sockaddr) uint16 {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return uint16(a.Port)
	case *unix.SockaddrInet6:
		return uint16(a.Port)
	}
	return 0
}

// TestFindAndFollow runs a "server" with two SO_REUSEPORT sockets on IPv4,
// one on IPv6 and an outgoing socket, and another process on the same
// port, in a namespace; finds the server's sockets by cgroup, by pid and
// by port alone; then restarts the server and finds its new sockets.
func TestFindAndFollow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and cgroups")
	}
	ns, err := santadtest.NewNetns(santadtest.NetnsName("offsrv"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	nsPath := netns.Named(ns.Name)
	root, err := cgroup2Root()
	if err != nil {
		t.Skip(err)
	}
	rel := fmt.Sprintf("santa-offload-test-%d", os.Getpid())
	cg := filepath.Join(root, rel)
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(cg) }) // after the helpers' cleanups stop them
	const port = 5353
	srv := startHelper(t, "server", nsPath, port, cg)
	other := startHelper(t, "other", nsPath, port, "")

	serverAddrs := []string{"0.0.0.0:5353", "0.0.0.0:5353", "[::1]:5353"}
	finders := []struct {
		name   string
		target Target
		addrs  []string
	}{
		{"cgroup", Target{Cgroup: rel, Port: port, Netns: nsPath}, serverAddrs},
		{"pid", Target{PID: srv.pid(), Port: port, Netns: nsPath}, serverAddrs},
		{"port", Target{Port: port, Netns: nsPath}, append(slices.Clone(serverAddrs[:2]), "127.0.0.2:5353", "[::1]:5353")},
	}
	for _, tt := range finders {
		f, err := NewFinder(tt.target)
		if err != nil {
			t.Fatal(err)
		}
		_, addrs, holders, inodes := found(t, f, nil)
		if !slices.Equal(addrs, tt.addrs) {
			t.Fatalf("%s: found %v; want %v", tt.name, addrs, tt.addrs)
		}
		if tt.name != "port" && (len(holders) != 1 || !holders[srv.pid()]) {
			t.Fatalf("%s: holders %v; want only the server %d", tt.name, holders, srv.pid())
		}
		// Known sockets are reported live, and nothing is fresh.
		live, again, _, _ := found(t, f, inodes)
		if len(again) != 0 || len(live) != len(inodes) {
			t.Fatalf("%s: second scan: live %v, fresh %v; want every known socket live", tt.name, live, again)
		}
	}

	// Restart: the old sockets are gone, the new ones are found, by a
	// finder made before the restart.
	byPID, _ := NewFinder(Target{PID: srv.pid(), Port: port, Netns: nsPath})
	_, _, _, old := found(t, byPID, nil)
	srv.stop()
	srv2 := startHelper(t, "server", nsPath, port, cg)
	live, addrs, holders, _ := found(t, byPID, old)
	if len(live) != 0 || !slices.Equal(addrs, serverAddrs) || !holders[srv2.pid()] || len(holders) != 1 {
		t.Fatalf("after restart: live %v, found %v held by %v; want none live and %v held by %d", live, addrs, holders, serverAddrs, srv2.pid())
	}
	other.stop()
}

// TestOneUserWithoutACgroup: without a cgroup, the port's sockets are
// the user's whose sockets were judged the server's while one of them is
// bound, and must all be one user's when none is; with a pid in the root
// cgroup only the sockets of the pid's user are the server's.
func TestOneUserWithoutACgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, other users' processes")
	}
	root, err := cgroup2Root()
	if err != nil {
		t.Skip(err)
	}
	ns, err := santadtest.NewNetns(santadtest.NetnsName("offuid"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	nsPath := netns.Named(ns.Name)
	const port = 5354
	// Both in the root cgroup: a pid there names no cgroup.
	srv := startHelper(t, "other", nsPath, port, root)
	byPort, err := NewFinder(Target{Port: port, Netns: nsPath})
	if err != nil {
		t.Fatal(err)
	}
	_, addrs, _, known := found(t, byPort, nil)
	if !slices.Equal(addrs, []string{"127.0.0.2:5354"}) {
		t.Fatalf("found %v; want the server's socket", addrs)
	}

	other := startHelper(t, "nobody", nsPath, port, root)
	// Another user's socket beside the server's is not taken, whether the
	// agent knows the server's (known) or has forgotten it (nil: a
	// broken connection to santad, whose services it takes up again).
	for _, k := range []map[uint64]bool{known, nil} {
		live, fresh, err := byPort.Scan(k)
		var addrs []string
		for _, s := range fresh {
			addrs = append(addrs, s.Local.String())
		}
		want := []string{"127.0.0.2:5354"}
		if k != nil {
			want = nil
		}
		if err != nil || !slices.Equal(addrs, want) || len(live) != len(k) {
			t.Fatalf("Scan(%v): live %v, fresh %v, %v; want %v fresh, none of the other user's", k, live, addrs, err, want)
		}
	}
	// A finder that judges the port afresh (the agent's start) cannot
	// tell which user is the server: the scan fails, naming both.
	afresh, err := NewFinder(Target{Port: port, Netns: nsPath})
	if err != nil {
		t.Fatal(err)
	}
	_, fresh, err := afresh.Scan(nil)
	if err == nil {
		t.Fatalf("Scan took %+v, sockets of two users", fresh)
	}
	for _, want := range []string{fmt.Sprintf("uid 0 (pid %d)", srv.pid()), fmt.Sprintf("uid 65534 (pid %d)", other.pid()), "-pid"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Scan: %q does not say %q", err, want)
		}
	}
	// A pid names its user's sockets.
	for _, tt := range []struct {
		h    *helper
		want string
	}{{srv, "127.0.0.2:5354"}, {other, "127.0.0.3:5354"}} {
		f, err := NewFinder(Target{PID: tt.h.pid(), Port: port, Netns: nsPath})
		if err != nil || f.cgroup != "" {
			t.Fatalf("NewFinder(pid %d): cgroup %q, %v; want none", tt.h.pid(), f.cgroup, err)
		}
		_, addrs, holders, _ := found(t, f, nil)
		if !slices.Equal(addrs, []string{tt.want}) || len(holders) != 1 || !holders[tt.h.pid()] {
			t.Errorf("pid %d: found %v held by %v; want %s held by it", tt.h.pid(), addrs, holders, tt.want)
		}
	}

	// The other user gone, the port is one user's again.
	other.stop()
	if _, addrs, _, _ := found(t, afresh, nil); !slices.Equal(addrs, []string{"127.0.0.2:5354"}) {
		t.Fatalf("found %v; want the server's socket", addrs)
	}
}

// TestTakeChecksTheServerAgain: Take takes a socket only if its holder
// is still a process of the server, in the cgroup or, without one,
// running as the user the scan judged the socket's. Since the scan, the
// holder's pid may have gone to another user's process
// (TestTakeChecksTheCgroupAfterPidReuse); here the holder itself leaves
// the cgroup, or changes its user.
func TestTakeChecksTheServerAgain(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, cgroups, other users' processes")
	}
	root, err := cgroup2Root()
	if err != nil {
		t.Skip(err)
	}
	ns, err := santadtest.NewNetns(santadtest.NetnsName("offtake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	nsPath := netns.Named(ns.Name)
	rel := fmt.Sprintf("santa-offload-take-%d", os.Getpid())
	cg := filepath.Join(root, rel)
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(cg) }) // after the helpers' cleanups stop them
	const port = 5355
	for _, tt := range []struct {
		name   string
		target Target
		leave  func(*helper) // makes the holder no process of the server's
		want   string        // in Take's refusal
	}{
		{"cgroup", Target{Cgroup: rel, Port: port, Netns: nsPath}, func(h *helper) {
			if err := os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(h.pid())), 0); err != nil {
				t.Fatal(err)
			}
		}, "not the server's"},
		{"port", Target{Port: port, Netns: nsPath}, func(h *helper) { h.drop(t) }, "runs as uid 65534"},
	} {
		srv := startHelper(t, "drops", nsPath, port, cg)
		f, err := NewFinder(tt.target)
		if err != nil {
			t.Fatal(err)
		}
		_, fresh, err := f.Scan(nil)
		if err != nil || len(fresh) != 1 || fresh[0].Holder.PID != srv.pid() {
			t.Fatalf("%s: Scan: %+v, %v; want the socket of %d", tt.name, fresh, err, srv.pid())
		}
		fd, err := f.Take(fresh[0])
		if err != nil {
			t.Fatalf("%s: Take: %v", tt.name, err)
		}
		unix.Close(fd)
		tt.leave(srv)
		if fd, err := f.Take(fresh[0]); err == nil || !strings.Contains(err.Error(), tt.want) {
			unix.Close(fd)
			t.Errorf("%s: Take of a socket whose holder is no longer the server's: %v; want a refusal saying %q", tt.name, err, tt.want)
		}
		srv.stop()
	}
}

const cgroupnsEnv = "SANTA_OFFLOAD_SERVER_CGROUPNS" // the server's cgroup, its pid and port

// TestTakeInACgroupNamespace: an agent in a cgroup namespace of its own
// (a container's: deploy/kubernetes's node agents), with the host's
// hierarchy mounted, finds and takes the sockets of a cgroup outside its
// namespace, whose processes' /proc/PID/cgroup it sees as "/../...".
func TestTakeInACgroupNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroups, a cgroup namespace")
	}
	root, err := cgroup2Root()
	if err != nil {
		t.Skip(err)
	}
	if env := os.Getenv(cgroupnsEnv); env != "" {
		var rel string
		var pid, port int
		if _, err := fmt.Sscan(env, &rel, &pid, &port); err != nil {
			t.Fatalf("%s=%q: %v", cgroupnsEnv, env, err)
		}
		if seen, err := cgroupOf(pid); err != nil || !strings.HasPrefix(seen, "/..") {
			t.Fatalf("the server's cgroup seen from here: %q, %v; want a path outside the namespace", seen, err)
		}
		f, err := NewFinder(Target{Cgroup: rel, Port: uint16(port)})
		if err != nil {
			t.Fatal(err)
		}
		if _, addrs, holders, _ := found(t, f, nil); len(addrs) != 1 || !holders[pid] {
			t.Fatalf("found %v held by %v; want the socket of %d", addrs, holders, pid)
		}
		return
	}
	var cgs []string
	for _, name := range []string{"server", "agent"} {
		cg := filepath.Join(root, fmt.Sprintf("santa-offload-cgns-%s-%d", name, os.Getpid()))
		if err := os.Mkdir(cg, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(cg) }) // after the processes in it end
		cgs = append(cgs, cg)
	}
	l, err := net.ListenPacket("udp4", "127.0.0.4:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()
	srv := startHelper(t, "drops", "", port, cgs[0])
	dir, err := os.Open(cgs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTakeInACgroupNamespace$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", cgroupnsEnv, filepath.Base(cgs[0]), srv.pid(), port))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd()), Cloneflags: unix.CLONE_NEWCGROUP}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a cgroup namespace of its own: %v\n%s", err, out)
	}
	srv.stop()
}

func TestNewFinder(t *testing.T) {
	for _, bad := range []Target{{PID: 1, Unit: "named", Port: 53}, {Unit: "a", Cgroup: "b", Port: 53}, {Port: 0}, {PID: -1, Port: 53},
		{Unit: "../user.slice", Port: 53}, {Unit: "..", Port: 53}, {Unit: "a/b.service", Port: 53}} {
		if _, err := NewFinder(bad); err == nil {
			t.Errorf("NewFinder(%+v) accepted", bad)
		}
	}
	root, err := cgroup2Root()
	if err != nil {
		t.Skip(err)
	}
	for _, tt := range []struct {
		t    Target
		want string
	}{
		{Target{Unit: "named", Port: 53}, filepath.Join(root, "system.slice/named.service")},
		{Target{Unit: "knot.service", Port: 53}, filepath.Join(root, "system.slice/knot.service")},
		{Target{Cgroup: "/", Port: 53}, ""},
		{Target{Cgroup: "../../etc", Port: 53}, filepath.Join(root, "etc")},
	} {
		f, err := NewFinder(tt.t)
		if err != nil || f.cgroup != tt.want {
			t.Errorf("NewFinder(%+v): cgroup %q, %v; want %q", tt.t, f.cgroup, err, tt.want)
		}
	}
}

// TestFindsTCPListeners: with a TCP port, a server's listeners are its
// sockets too (memcached's); its connections, and the listeners of a
// finder without a TCP port, are not.
func TestFindsTCPListeners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, other processes' fds")
	}
	ns, err := santadtest.NewNetns(santadtest.NetnsName("offmc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	nsPath := netns.Named(ns.Name)
	const port = 11211
	srv := startHelper(t, "memcached", nsPath, port, "")
	for _, tt := range []struct {
		target Target
		want   []string
	}{
		{Target{PID: srv.pid(), Port: port, TCPPort: port + 1, Netns: nsPath}, []string{"tcp 127.0.0.1:11212", "udp 127.0.0.1:11211"}},
		{Target{PID: srv.pid(), Port: port, Netns: nsPath}, []string{"udp 127.0.0.1:11211"}},
	} {
		f, err := NewFinder(tt.target)
		if err != nil {
			t.Fatal(err)
		}
		_, fresh, err := f.Scan(nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range fresh {
			proto := "udp"
			if s.TCP {
				proto = "tcp"
			}
			got = append(got, proto+" "+s.Local.String())
			if s.Holder.PID != srv.pid() {
				t.Errorf("%v held by %d, not the server %d", s.Local, s.Holder.PID, srv.pid())
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%+v: found %v; want %v", tt.target, got, tt.want)
		}
	}
}

func TestAskAddr(t *testing.T) {
	for in, want := range map[string]string{"0.0.0.0:11211": "127.0.0.1:11211", "[::]:53": "[::1]:53",
		"10.0.0.1:53": "10.0.0.1:53", "[::ffff:10.0.0.1]:53": "10.0.0.1:53"} {
		if got := AskAddr(netip.MustParseAddrPort(in)); got.String() != want {
			t.Errorf("AskAddr(%s) = %v; want %s", in, got, want)
		}
	}
}

// TestUnprivilegedPortStart reads the sysctl of the namespace named, not
// the caller's.
func TestUnprivilegedPortStart(t *testing.T) {
	own, err := UnprivilegedPortStart("")
	if err != nil || own < 0 || own > 65536 {
		t.Fatalf("this namespace's: %d, %v", own, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	ns, err := santadtest.NewNetns(santadtest.NetnsName("offport"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	want := 4242
	if own == want {
		want++
	}
	err = ns.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_unprivileged_port_start", []byte(strconv.Itoa(want)), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := UnprivilegedPortStart(netns.Named(ns.Name)); got != want || err != nil {
		t.Errorf("the namespace's: %d, %v; want %d", got, err, want)
	}
	if got, _ := UnprivilegedPortStart(""); got != own {
		t.Errorf("this namespace's became %d; want %d still", got, own)
	}
}
