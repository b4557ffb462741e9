package daemon

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/protocol/protocoltest"
	"github.com/santa-offload/santa/rule"
)

// Garbage, truncated and oversized messages get a clear error; EPROTO and
// EMSGSIZE close the connection, the rest do not; another client connected
// all the while keeps working; santad keeps no descriptor a client sends.
func TestBadMessages(t *testing.T) {
	e := newEnv(t, "p", "")
	other := e.client(t)
	fdsBefore, err := e.d.OpenFDs()
	if err != nil {
		t.Fatal(err)
	}
	hello := encode(t, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "raw"})
	detach := encode(t, &protocol.Detach{ServiceID: 1})
	truncated := append([]byte(nil), detach[:18]...)
	truncated[8] = 18 // the length field agrees: only the body is short
	oversized := make([]byte, 200000)
	copy(oversized, detach)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	u1, u2 := e.listenUDP(t), e.listenUDP(t)
	f1, f2 := fileOf(t, u1), fileOf(t, u2)

	for _, tc := range []struct {
		name  string
		hello bool // HELLO first
		msg   []byte
		fds   []int
		code  syscall.Errno
		close bool
	}{
		{"no HELLO", false, encode(t, &protocol.Status{}), nil, syscall.EPROTO, true},
		{"garbage", true, []byte("GET / HTTP/1.1\r\nHost: santa\r\n\r\n"), nil, syscall.EPROTO, true},
		{"truncated", true, truncated, nil, syscall.EBADMSG, false},
		{"oversized", true, oversized, nil, syscall.EMSGSIZE, true},
		{"ATTACH without a descriptor", true, encode(t, &protocol.Attach{}), nil, syscall.EBADF, false},
		{"ATTACH with two", true, encode(t, &protocol.Attach{}), []int{int(f1.Fd()), int(f2.Fd())}, syscall.EBADF, false},
		{"ATTACH of a pipe", true, encode(t, &protocol.Attach{}), []int{int(r.Fd())}, syscall.ENOTSOCK, false},
		{"descriptors with STATUS", true, encode(t, &protocol.Status{}), []int{int(f1.Fd()), int(w.Fd())}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, e.d.Socket)
			if tc.hello {
				c.send(t, hello)
				c.reply(t)
			}
			c.send(t, tc.msg, tc.fds...)
			reply := c.reply(t)
			perr, isErr := reply.(*protocol.Error)
			switch {
			case tc.code == 0 && isErr:
				t.Fatalf("refused: %v", perr)
			case tc.code != 0 && (!isErr || perr.Code != tc.code):
				t.Fatalf("reply %v; want %v", reply, tc.code)
			case isErr:
				t.Logf("%v", perr)
			}
			if tc.close {
				c.closed(t)
			} else {
				c.send(t, encode(t, &protocol.Status{}))
				if _, ok := c.reply(t).(*protocol.StatusReply); !ok {
					t.Fatal("the connection does not answer after the error")
				}
			}
			if _, err := other.Status(); err != nil {
				t.Fatalf("the other client: %v", err)
			}
		})
	}

	// The attached socket is closed in santad at once.
	c := dialRaw(t, e.d.Socket)
	c.send(t, hello)
	c.reply(t)
	c.send(t, encode(t, &protocol.Attach{}), int(f1.Fd()))
	if _, ok := c.reply(t).(*protocol.ServiceInfo); !ok {
		t.Fatal("ATTACH refused")
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f1.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if held, err := e.d.HoldsSocket(st.Ino); err != nil || held {
		t.Errorf("santad holds the attached socket: %v, %v", held, err)
	}
	c.conn.Close()
	waitFor(t, "santad to close the raw connections", 2*time.Second, func() bool {
		n, err := e.d.OpenFDs()
		return err == nil && n <= fdsBefore
	})
}

func encode(t *testing.T, body protocol.Body) []byte {
	t.Helper()
	msg, err := protocol.Encode(1, 1, body)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// rawConn speaks datagrams to santad without the client's checks.
type rawConn struct{ conn *net.UnixConn }

func dialRaw(t *testing.T, path string) *rawConn {
	t.Helper()
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetWriteBuffer(1 << 20) // room for the oversized message
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{conn}
}

func (c *rawConn) send(t *testing.T, msg []byte, fds ...int) {
	t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.conn.WriteMsgUnix(msg, oob, nil); err != nil {
		t.Fatalf("sending: %v", err)
	}
}

// sendEmpty sends a message of no bytes with the descriptors fds.
func (c *rawConn) sendEmpty(t *testing.T, fds ...int) {
	t.Helper()
	raw, err := c.conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if cerr := raw.Control(func(fd uintptr) { err = protocoltest.SendEmpty(int(fd), fds...) }); cerr != nil || err != nil {
		t.Fatalf("sending: %v, %v", cerr, err)
	}
}

// reply reads one reply; nil if santad closed the connection.
func (c *rawConn) reply(t *testing.T) protocol.Body {
	t.Helper()
	buf := make([]byte, protocol.MaxMessage)
	n, err := c.conn.Read(buf)
	if err != nil || n == 0 {
		return nil
	}
	_, body, err := protocol.Decode(buf[:n])
	if err != nil {
		t.Fatalf("bad reply: %v", err)
	}
	return body
}

// closed checks that santad closed the connection.
func (c *rawConn) closed(t *testing.T) {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.conn.Read(make([]byte, 16)); !errors.Is(err, io.EOF) {
		t.Fatalf("connection still open: %d bytes, %v", n, err)
	}
}

// A rule the data plane cannot serve is refused with its index in the
// batch: the daemon checks it against the service's own limits (a UDP
// reply fits one datagram; 8 distinct condition offsets) before the data
// plane, whose error does not name the request's item.
func TestRuleErrorIndex(t *testing.T) {
	e := newEnv(t, "ri", "")
	c := e.client(t)
	svc, err := c.Attach(e.listenUDP(t))
	if err != nil {
		t.Fatal(err)
	}
	tooLong := pingRule
	tooLong.ReplyLen = rule.MaxUDPReply + 1
	var offsets []rule.Rule // the last is one distinct offset too many
	for i := range rule.MaxRegions + 1 {
		r := pingRule
		r.Condition.Offset = uint16(10 * i)
		offsets = append(offsets, r)
	}
	for _, batch := range [][]rule.Rule{{tooLong}, {pingRule, tooLong}, offsets} {
		_, err := c.AddRules(svc.ServiceID, batch)
		var perr *protocol.Error
		if !errors.As(err, &perr) || perr.Code != syscall.EINVAL || perr.Index != uint32(len(batch)-1) {
			t.Errorf("ADD_RULES with rule %d bad: %v; want EINVAL at index %d", len(batch)-1, err, len(batch)-1)
		}
	}
	// The data plane takes as many offsets as the daemon lets through.
	if _, err := c.AddRules(svc.ServiceID, offsets[:rule.MaxRegions]); err != nil {
		t.Errorf("ADD_RULES with %d distinct offsets: %v", rule.MaxRegions, err)
	}
}
