package daemon

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
)

// Whatever is passed to ATTACH that is not a socket gets ENOTSOCK, saying
// what it is: O_PATH descriptors, of a socket's inode too, included.
func TestAttachNotASocket(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.connect(t, alice, true)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	unixSock := filepath.Join(dir, "sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: unixSock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	udpSock := fmt.Sprintf("/proc/self/fd/%d", fdOf(t, udp(t)))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	open := func(path string, flags int) int {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)

	cases := []struct {
		name string
		fd   int
		want string
	}{
		{"O_PATH of a file", open(file, unix.O_PATH), "an O_PATH descriptor"},
		{"O_PATH of a Unix socket's path", open(unixSock, unix.O_PATH), "an O_PATH descriptor"},
		{"O_PATH of a UDP socket", open(udpSock, unix.O_PATH), "an O_PATH descriptor"},
		{"regular file", open(file, unix.O_RDONLY), "a regular file"},
		{"directory", open(dir, unix.O_RDONLY), "a directory"},
		{"pipe", int(r.Fd()), "a pipe"},
		{"device", open("/dev/null", unix.O_RDONLY), "a device"},
		{"eventfd", efd, "an anonymous inode"},
	}
	before := openFDs(t)
	for _, tc := range cases {
		want := "the descriptor passed is not a socket: it is " + tc.want
		if e, ok := c.call(&protocol.Attach{}, tc.fd).(*protocol.Error); !ok || e.Code != syscall.ENOTSOCK || !strings.HasPrefix(e.Message, want) {
			t.Errorf("%s: ATTACH gives %v; want ENOTSOCK with %q", tc.name, e, want)
		}
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before, %d after: santad kept some", before, after)
	}
	if n := s.serviceCount(); n != 0 {
		t.Errorf("%d services registered", n)
	}
}
