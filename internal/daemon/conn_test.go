package daemon

import (
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
)

// Descriptors passed with a message that ends the connection are closed
// like any others: an empty message, one too long, one that breaks the
// protocol. Sent over and over, they leave no descriptor open, and a
// socket passed so is really closed when its application closes it.
func TestDescriptorsOfMessagesThatEndTheConnection(t *testing.T) {
	s := newTestServer(t, nil)
	status, _ := protocol.Encode(1, 1, &protocol.Status{})
	oversized := append(status, make([]byte, protocol.MaxMessage)...)
	u := udp(t)
	port := u.LocalAddr().(*net.UDPAddr).Port
	ufd := fdOf(t, u)

	before := openFDs(t)
	for _, tc := range []struct {
		name  string
		hello bool
		send  func(c *conn)
		code  syscall.Errno
		want  string
	}{
		{"empty", true, func(c *conn) { c.sendEmpty(ufd, ufd) }, syscall.EPROTO, "message is 0 bytes"},
		{"empty, before HELLO", false, func(c *conn) { c.sendEmpty(ufd) }, syscall.EPROTO, "message is 0 bytes"},
		{"oversized", true, func(c *conn) { c.send(oversized, ufd) }, syscall.EMSGSIZE, "the limit is"},
		{"garbage", true, func(c *conn) { c.send([]byte("GET / HTTP/1.0\r\n\r\n"), ufd) }, syscall.EPROTO, "magic"},
		{"before HELLO", false, func(c *conn) { c.send(status, ufd) }, syscall.EPROTO, "must be HELLO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 100 {
				c := s.connect(t, alice, tc.hello)
				tc.send(c)
				if e, ok := c.recv().(*protocol.Error); !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.want) {
					t.Fatalf("reply %v; want %v with %q", e, tc.code, tc.want)
				}
				c.closed()
				c.close()
			}
		})
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before, %d after: santad kept some", before, after)
	}
	u.Close()
	again, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Fatalf("port %d still held after its socket was closed: %v", port, err)
	}
	again.Close()
}

// A client that closes its connection, or only its sending side, gets no
// reply to the empty read that ends it: that is no empty message.
func TestEndOfConnection(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.connect(t, alice, true)
	if err := unix.Shutdown(c.fd, unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	c.closed()
	eventually(t, "the connection to end", func() bool { return s.connections() == 0 })
}

// When a message carries more descriptors than there is room for
// (MSG_CTRUNC), the kernel closes those that do not fit; those that do
// are the receiver's, and returned to be closed.
func TestTruncatedDescriptors(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	receiver := unixConn(t, pair[1])
	defer receiver.Close()
	raw, err := receiver.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	before := openFDs(t)
	many := make([]int, 10)
	for i := range many {
		many[i] = int(r.Fd())
	}
	if err := unix.Sendmsg(pair[0], []byte("x"), unix.UnixRights(many...), nil, 0); err != nil {
		t.Fatal(err)
	}
	n, fds, err := receive(raw, make([]byte, 16), make([]byte, unix.CmsgSpace(4*2)))
	if err != nil || n != 1 || len(fds) != 2 {
		t.Fatalf("received %d bytes, descriptors %v, %v; want 1 byte and the 2 that fit", n, fds, err)
	}
	closeFDs(fds)
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before, %d after", before, after)
	}
}

// A uid that is not an admin holds at most quota_connections connections:
// the next one's first request is refused EDQUOT and the connection ends,
// and a connection closed makes room again. Admins and other uids are not
// held to alice's count.
func TestConnectionQuota(t *testing.T) {
	s := newTestServer(t, func(c *Config) { c.QuotaConnections = 2 })
	first := s.connect(t, alice, true)
	s.connect(t, alice, true)
	over := s.connect(t, alice, false)
	over.refused(&protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "test"}, syscall.EDQUOT,
		"quota of 2 connections to santad for uid 1000 exceeded")
	over.closed()
	// While one refusal waits for its request, more connections of the
	// uid are closed at once: santad holds no more of them.
	waiting := s.connect(t, alice, false)
	for deadline := time.Now().Add(5 * time.Second); !s.refusingUID(alice.UID); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection over the quota is not waiting to be told")
		}
	}
	for range 50 {
		s.connect(t, alice, false).closed()
	}
	waiting.refused(&protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "test"}, syscall.EDQUOT,
		"quota of 2 connections to santad for uid 1000 exceeded")
	// Each refusal is counted, told or not (before its connection ends).
	wantLines(t, s.scrape(t), `santa_connections_refused_total{reason="quota"} 52`)
	for range 3 {
		s.connect(t, admin, true)
	}
	s.connect(t, bob, true)
	first.close()
	// The server counts the connection out once its goroutine has ended.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := s.connect(t, alice, false)
		reply := c.call(&protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "test"})
		if _, refused := reply.(*protocol.Error); !refused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection did not make room")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
