// Package servertest is a server.Finder for the agents' tests: it reports
// the sockets the test gives it, held by the test's own process, and
// takes them.
package servertest

import (
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/offload/server"
	"github.com/santa-offload/santa/internal/procsock"
)

// Finder reports the sockets of its last Set.
type Finder struct {
	mu      sync.Mutex
	sockets map[uint64]server.Socket
}

// Set makes the finder report conns (*net.UDPConn, *net.TCPListener), held
// by this process.
func (f *Finder) Set(t *testing.T, conns ...syscall.Conn) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sockets = map[uint64]server.Socket{}
	for _, c := range conns {
		raw, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var s server.Socket
		raw.Control(func(fd uintptr) {
			var st unix.Stat_t
			unix.Fstat(int(fd), &st)
			s.Inode = st.Ino
			s.Holder.PID, s.Holder.FD = os.Getpid(), int(fd)
		})
		switch c := c.(type) {
		case *net.UDPConn:
			s.Local = c.LocalAddr().(*net.UDPAddr).AddrPort()
		case *net.TCPListener:
			s.TCP, s.Local = true, c.Addr().(*net.TCPAddr).AddrPort()
		default:
			t.Fatalf("servertest: a %T is no server socket", c)
		}
		f.sockets[s.Inode] = s
	}
}

// Scan is server.Finder's.
func (f *Finder) Scan(known map[uint64]bool) (map[uint64]bool, []server.Socket, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	live := map[uint64]bool{}
	var fresh []server.Socket
	for _, inode := range slices.Sorted(maps.Keys(f.sockets)) {
		if known[inode] {
			live[inode] = true
		} else {
			fresh = append(fresh, f.sockets[inode])
		}
	}
	return live, fresh, nil
}

// Take is server.Finder's, for sockets of this process: it checks only
// that the fd is still the socket.
func (f *Finder) Take(s server.Socket) (int, error) {
	return procsock.TakeSocket(s.Holder, s.Inode, nil)
}

// UDP is conns as syscall.Conns, for Set.
func UDP(conns []*net.UDPConn) []syscall.Conn {
	out := make([]syscall.Conn, len(conns))
	for i, c := range conns {
		out[i] = c
	}
	return out
}
