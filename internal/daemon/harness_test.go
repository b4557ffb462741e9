package daemon

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/protocol/protocoltest"
	"github.com/santa-offload/santa/rule"
)

// The server's tests run it on a fake data plane, with connections made by
// socketpair so that each can claim any peer: no root, no kernel.

var (
	alice = Peer{UID: 1000, GID: 100, PID: 11}
	bob   = Peer{UID: 1001, GID: 100, PID: 12}
	admin = Peer{UID: 1002, GID: 100, PID: 13, Admin: true}
)

type testServer struct {
	*Server
	dp  *fakeDP
	dir string // state directory
}

// newTestServer serves a fake data plane with a journal in a temporary
// directory; edit adjusts the configuration.
func newTestServer(t *testing.T, edit func(*Config)) *testServer {
	t.Helper()
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	dir := t.TempDir()
	j, _, err := journal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	netns, err := ownNetns()
	if err != nil {
		t.Fatal(err)
	}
	dp := newFakeDP()
	s, err := NewServer(dp, j, cfg, netns, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.closeConns()
		j.Close()
	})
	return &testServer{Server: s, dp: dp, dir: dir}
}

// usageOf is what uid holds, read under the server's lock: the server's
// goroutines may still be writing it.
func (s *testServer) usageOf(uid uint32) usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.usage[uid]
}

// service is the server's service id, read under its lock.
func (s *testServer) service(id uint32) *service {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.services[model.ServiceID(id)]
}

// journalSizes are the journal's size and the size a snapshot of the state
// would have, read under the server's lock.
func (s *testServer) journalSizes() (journal, snapshot int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.journal.Size(), s.st.live
}

// refusingUID says whether a connection of uid over its quota is waiting
// to be told so.
func (s *testServer) refusingUID(uid uint32) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return s.refusing[uid]
}

// serviceCount is how many services the server knows.
func (s *testServer) serviceCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.st.services)
}

// conn is a client end of a connection, speaking raw datagrams.
type conn struct {
	t       *testing.T
	fd      int
	seq     uint32
	version uint16 // what HELLO agreed on; 0 before, when messages go in version 1
}

// connect serves a new connection from peer; with hello, it says HELLO.
func (s *testServer) connect(t *testing.T, peer Peer, hello bool) *conn {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(unixConn(t, fds[1]), peer)
	c := &conn{t: t, fd: fds[0]}
	unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	t.Cleanup(c.close)
	if hello {
		c.ok(&protocol.Hello{MinVersion: protocol.MinVersion, MaxVersion: protocol.MaxVersion, Client: "test"})
	}
	return c
}

// connectV2 is connect with a HELLO that agrees on version 2, as an
// agent named "agent".
func (s *testServer) connectV2(t *testing.T, peer Peer) *conn {
	t.Helper()
	c := s.connect(t, peer, false)
	c.ok(&protocol.Hello{MinVersion: protocol.Version2, MaxVersion: protocol.Version2, Client: "agent"})
	return c
}

// connectV1 is connect with HELLO, as a client that speaks version 1 only.
func (s *testServer) connectV1(t *testing.T, peer Peer) *conn {
	t.Helper()
	c := s.connect(t, peer, false)
	c.ok(&protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "v1"})
	return c
}

// send writes one datagram with the descriptors fds.
func (c *conn) send(msg []byte, fds ...int) {
	c.t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(c.fd, msg, oob, nil, 0); err != nil {
		c.t.Fatalf("sending: %v", err)
	}
}

// unixConn makes a *net.UnixConn of the socket fd, which it takes over.
func unixConn(t *testing.T, fd int) *net.UnixConn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "socket")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return nc.(*net.UnixConn)
}

// close closes the client end; once only, so that a descriptor number
// reused meanwhile is not closed.
func (c *conn) close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// sendEmpty sends a message of no bytes with the descriptors fds.
func (c *conn) sendEmpty(fds ...int) {
	c.t.Helper()
	if err := protocoltest.SendEmpty(c.fd, fds...); err != nil {
		c.t.Fatalf("sending: %v", err)
	}
}

// recv reads one reply; nil if the server closed the connection.
func (c *conn) recv() protocol.Body {
	c.t.Helper()
	_, body := c.recvSeq()
	return body
}

func (c *conn) recvSeq() (uint32, protocol.Body) {
	c.t.Helper()
	buf := make([]byte, protocol.MaxMessage)
	n, err := c.read(buf)
	if err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	if n == 0 {
		return 0, nil
	}
	h, body, err := protocol.Decode(buf[:n])
	if err != nil {
		c.t.Fatalf("bad reply: %v", err)
	}
	if hr, ok := body.(*protocol.HelloReply); ok {
		c.version = hr.Version
	}
	if want := cmp.Or(c.version, h.Version); h.Version != want {
		c.t.Fatalf("%v in version %d; HELLO agreed on %d", h.Type, h.Version, want)
	}
	return h.Seq, body
}

// call sends req (with fds) and returns the reply.
func (c *conn) call(req protocol.Body, fds ...int) protocol.Body {
	c.t.Helper()
	c.seq++
	msg, err := protocol.Encode(cmp.Or(c.version, protocol.Version1), c.seq, req)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(msg, fds...)
	seq, body := c.recvSeq()
	if body != nil && seq != c.seq {
		c.t.Fatalf("reply seq %d to request %d", seq, c.seq)
	}
	return body
}

// ok calls req and fails the test on an error reply.
func (c *conn) ok(req protocol.Body, fds ...int) protocol.Body {
	c.t.Helper()
	reply := c.call(req, fds...)
	if e, isErr := reply.(*protocol.Error); isErr || reply == nil {
		c.t.Fatalf("%v: %v", req.Type(), e)
	}
	return reply
}

// refused calls req and checks the error's code and that its message
// holds want.
func (c *conn) refused(req protocol.Body, code syscall.Errno, want string, fds ...int) *protocol.Error {
	c.t.Helper()
	e, ok := c.call(req, fds...).(*protocol.Error)
	if !ok || e.Code != code || !strings.Contains(e.Message, want) {
		c.t.Fatalf("%v gives %v; want %v with %q", req.Type(), e, code, want)
	}
	return e
}

// read reads one message, again when a signal interrupted the wait: with
// a receive timeout (SO_RCVTIMEO) a read is not restarted, and the Go
// runtime's preemption signals interrupt it (CI saw EINTR).
func (c *conn) read(buf []byte) (int, error) {
	for {
		n, _, _, _, err := unix.Recvmsg(c.fd, buf, nil, 0)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// closed checks that the server closed the connection.
func (c *conn) closed() {
	c.t.Helper()
	buf := make([]byte, 16)
	n, err := c.read(buf)
	if n != 0 || err != nil {
		c.t.Fatalf("connection still open: read %d bytes, %v", n, err)
	}
}

// udp is a bound UDP socket; cleanup closes it.
func udp(t *testing.T) *net.UDPConn {
	t.Helper()
	u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

func fdOf(t *testing.T, c interface {
	SyscallConn() (syscall.RawConn, error)
}) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// attach attaches a new socket of c's and returns its service id.
func (c *conn) attach() uint32 {
	c.t.Helper()
	return c.ok(&protocol.Attach{}, fdOf(c.t, udp(c.t))).(*protocol.ServiceInfo).ServiceID
}

func testRule(name string, replyLen int) rule.Rule {
	return rule.Rule{
		Condition:  rule.Condition{Offset: 0, Pattern: []byte(name)},
		Processors: []rule.Processor{rule.Put(0, []byte("R"))},
		ReplyLen:   uint16(replyLen),
	}
}

// testRules are n rules whose patterns are no prefixes of one another.
func testRules(prefix string, n, replyLen int) []rule.Rule {
	out := make([]rule.Rule, n)
	for i := range out {
		out[i] = testRule(fmt.Sprintf("%s%07d", prefix, i), replyLen)
	}
	return out
}

// openFDs counts this process's descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// eventually waits for cond, for up to a second.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a second", what)
		}
	}
}
