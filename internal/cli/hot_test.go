package cli

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
)

// learn turns learning on with the options given; hot prints what the
// daemon says passed most, escaped as patterns are.
func TestLearnAndHot(t *testing.T) {
	f, path := newFake(t)
	id := f.addService(client.ServiceInfo{Protocol: 17, Family: 4, Port: 53}, client.ServiceStats{})
	svc := fmt.Sprint(id)
	stdout, stderr, code := santactl(t, path, "hot", svc)
	if code != 1 || !strings.Contains(stderr, "learning is off") {
		t.Fatalf("hot before learn: stdout %q, stderr %q, status %d", stdout, stderr, code)
	}
	if _, stderr, code := santactl(t, path, "learn", "-key-offset", "2", "-probe-port", "5300", "-counts", "12500", svc); code != 0 {
		t.Fatalf("learn: %s", stderr)
	}
	f.mu.Lock()
	got := *f.services[id].learning
	f.services[id].hot = protocol.HotReply{WindowMS: 1000, CountedPPM: 125000, Requests: []protocol.HotRequest{
		{Passes: 120, Key: []byte("\x01\x00\x00\x01\x03www\x00")}, {Passes: 7, Key: []byte("ab")}}}
	f.mu.Unlock()
	if want := (protocol.Learn{ServiceID: id, KeyOff: 2, ProbePort: 5300, Enable: true, Counts: 12500}); got != want {
		t.Errorf("LEARN sent %+v, want %+v", got, want)
	}
	stdout, stderr, code = santactl(t, path, "hot", "-n", "5", svc)
	check(t, "hot", stdout, `service 7, passed in the last 1.0 s (12.5 % of them counted, scaled up):
PASSES  BYTES  KEY
120     9      "\x01\x00\x00\x01\x03www\x00"
7       2      "ab"
`)
	if stderr != "" || code != 0 {
		t.Errorf("hot: stderr %q, status %d", stderr, code)
	}
	stdout, _, _ = santactl(t, path, "-json", "hot", "-n", "1", svc)
	check(t, "hot -json", stdout, `{
  "service_id": 7,
  "window_ms": 1000,
  "counted_ppm": 125000,
  "requests": [
    {
      "passes": 120,
      "key": {
        "hex": "010000010377777700"
      }
    }
  ]
}
`)
	if _, stderr, code := santactl(t, path, "learn", "-off", svc); code != 0 {
		t.Errorf("learn -off: %s", stderr)
	}
	f.mu.Lock()
	if f.services[id].learning.Enable {
		t.Error("learn -off left learning on")
	}
	f.mu.Unlock()
	_, stderr, code = santactl(t, path, "learn", "-probe-port", "70000", svc)
	if code != 2 || !strings.HasPrefix(stderr, "santactl: learn: -probe-port 70000 is not a port\n") {
		t.Errorf("learn -probe-port 70000: stderr %q, status %d", stderr, code)
	}
}

// attach -port attaches every UDP socket of a SO_REUSEPORT group, and
// says so.
func TestAttachPortGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attach -port needs root")
	}
	f, path := newFake(t)
	first, _, c1 := reusePortUDP(t, 0)
	port := first.LocalAddr().(*net.UDPAddr).Port
	_, _, c2 := reusePortUDP(t, port)
	stdout, stderr, code := santactl(t, path, "attach", "-port", fmt.Sprint(port))
	if code != 0 || stderr != fmt.Sprintf("santactl: attach: 2 UDP sockets are bound to port %d: attached every one\n", port) {
		t.Fatalf("attach: stderr %q, status %d", stderr, code)
	}
	f.mu.Lock()
	cookies := slices.Sorted(slices.Values(f.cookies))
	f.mu.Unlock()
	if want := slices.Sorted(slices.Values([]uint64{c1, c2})); !slices.Equal(cookies, want) {
		t.Errorf("the daemon got cookies %v, want %v", cookies, want)
	}
	if lines := strings.Count(stdout, "\n"); lines != 3 {
		t.Errorf("attach printed %d lines, want a header and two services:\n%s", lines, stdout)
	}
}

// reusePortUDP opens a SO_REUSEPORT UDP socket on 127.0.0.1:port (0: any),
// with its fd and SO_COOKIE.
func reusePortUDP(t *testing.T, port int) (*net.UDPConn, int, uint64) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "udp")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	conn := c.(*net.UDPConn)
	sfd, cookie := fdOf(t, conn)
	return conn, sfd, cookie
}
