package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// openUDP opens a UDP socket on 127.0.0.1 and returns it with its fd and
// SO_COOKIE.
func openUDP(t *testing.T) (*net.UDPConn, int, uint64) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fd, cookie := fdOf(t, conn)
	return conn, fd, cookie
}

// fdOf is a descriptor of the socket of its own (the test's fd) and the
// socket's SO_COOKIE.
func fdOf(t *testing.T, sock interface{ File() (*os.File, error) }) (int, uint64) {
	f, err := sock.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cookie, err := unix.GetsockoptUint64(int(f.Fd()), unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		t.Fatal(err)
	}
	return int(f.Fd()), cookie
}

// openTCP opens a TCP listener on 127.0.0.1 and returns it with its fd and
// SO_COOKIE.
func openTCP(t *testing.T) (*net.TCPListener, int, uint64) {
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	fd, cookie := fdOf(t, ln)
	return ln, fd, cookie
}

// attached checks that the fake was given the socket with cookie and that
// santactl printed the service, of protocol proto bound to local.
func attached(t *testing.T, f *fake, proto string, local net.Addr, cookie uint64, stdout, stderr string, code int) {
	t.Helper()
	f.mu.Lock()
	cookies := slices.Clone(f.cookies)
	f.mu.Unlock()
	if !slices.Equal(cookies, []uint64{cookie}) {
		t.Errorf("the daemon got sockets with cookies %v, want %d", cookies, cookie)
	}
	want := fmt.Sprintf("ID  PROTO  ADDRESS          OWNER  RULES  COOKIE  MANAGER\n7   %-5s  %-15v  1000   0      %-6d  %s\n", proto, local, cookie, filepath.Base(os.Args[0]))
	if stdout != want || stderr != "" || code != 0 {
		t.Errorf("attach: stdout %q, stderr %q, exit status %d; want stdout %q", stdout, stderr, code, want)
	}
}

// TestAttachPidFD attaches a socket of the test's own process by pid and
// fd. pidfd_getfd (Linux 5.6) on one's own process needs no privilege.
func TestAttachPidFD(t *testing.T) {
	f, path := newFake(t)
	conn, fd, cookie := openUDP(t)
	stdout, stderr, code := santactl(t, path, "attach", "-pid", fmt.Sprint(os.Getpid()), "-fd", fmt.Sprint(fd))
	attached(t, f, "udp", conn.LocalAddr(), cookie, stdout, stderr, code)
}

// TestAttachPort finds a socket of the test's own process by its port, in
// this network namespace and then entering it by path. It needs root, as
// attach -port does.
func TestAttachPort(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attach -port needs root")
	}
	for _, netns := range []string{"", "/proc/self/ns/net"} {
		f, path := newFake(t)
		conn, _, cookie := openUDP(t)
		addr := conn.LocalAddr().(*net.UDPAddr)
		args := []string{"attach", "-port", fmt.Sprint(addr.Port), "-addr", "127.0.0.1"}
		if netns != "" {
			args = append(args, "-netns", netns)
		}
		stdout, stderr, code := santactl(t, path, args...)
		attached(t, f, "udp", conn.LocalAddr(), cookie, stdout, stderr, code)
	}
	// With -tcp, the TCP listener on the port, not a UDP socket on it.
	f, path := newFake(t)
	ln, _, cookie := openTCP(t)
	port := ln.Addr().(*net.TCPAddr).Port
	stdout, stderr, code := santactl(t, path, "attach", "-port", fmt.Sprint(port), "-tcp")
	attached(t, f, "tcp", ln.Addr(), cookie, stdout, stderr, code)
}

func TestAttachErrors(t *testing.T) {
	_, path := newFake(t)
	usage := "usage: santactl [-socket PATH] [-json] attach -pid PID -fd FD | -port PORT [-tcp] [-addr ADDR] [-netns PATH]\n"
	tests := []struct {
		args   []string
		stderr string
		code   int
	}{
		{[]string{"attach"}, "santactl: attach: give -pid and -fd, or -port\n" + usage, 2},
		{[]string{"attach", "-pid", "1"}, "santactl: attach: give both -pid and -fd\n" + usage, 2},
		{[]string{"attach", "-pid", "1", "-fd", "3", "-port", "53"}, "santactl: attach: give -pid and -fd, or -port\n" + usage, 2},
		{[]string{"attach", "-pid", "1", "-fd", "3", "-addr", "::1"}, "santactl: attach: -tcp, -addr and -netns go with -port\n" + usage, 2},
		{[]string{"attach", "-pid", "1", "-fd", "3", "-tcp"}, "santactl: attach: -tcp, -addr and -netns go with -port\n" + usage, 2},
		{[]string{"attach", "-port", "70000"}, "santactl: attach: -port 70000 is not a port\n" + usage, 2},
		{[]string{"attach", "-pid", fmt.Sprint(os.Getpid()), "-fd", "999999"},
			fmt.Sprintf("santactl: attach: take fd 999999 of process %d: bad file descriptor\n", os.Getpid()), 1},
	}
	if os.Geteuid() == 0 {
		tests = append(tests, struct {
			args   []string
			stderr string
			code   int
		}{[]string{"attach", "-port", "9", "-addr", "127.0.0.9"}, "santactl: attach: no UDP socket bound to 127.0.0.9:9\n", 1},
			struct {
				args   []string
				stderr string
				code   int
			}{[]string{"attach", "-port", "9", "-tcp"}, "santactl: attach: no TCP socket listening on port 9\n", 1})
	}
	for _, tt := range tests {
		stdout, stderr, code := santactl(t, path, tt.args...)
		if stdout != "" || stderr != tt.stderr || code != tt.code {
			t.Errorf("%q: stdout %q, stderr %q, exit status %d; want stderr %q, status %d", tt.args, stdout, stderr, code, tt.stderr, tt.code)
		}
	}
}
