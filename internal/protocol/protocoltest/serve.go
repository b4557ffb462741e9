// Package protocoltest serves the protocol for the fakes of santad that
// tests of its clients (the Go client, santactl) answer with.
package protocoltest

import (
	"net"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
)

// Handler answers one decoded request; fds are the descriptors it carried,
// closed once it returns.
type Handler func(req protocol.Body, fds []int) protocol.Body

// Serve listens on a unixpacket socket in a temporary directory of t until
// the test ends, and returns its path. Each connection's requests are
// answered one at a time by handle; a request that does not decode gets
// its decoding error. A reply is in the version of its request, but for a
// HELLO reply, which is in the version it names, as santad's. With lock,
// handle and the reply's encoding run under it: a fake's reply may share
// state that the next request changes.
func Serve(t testing.TB, lock sync.Locker, handle Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "santa.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if lock == nil {
		lock = noLock{}
	}
	go func() {
		for {
			conn, err := l.AcceptUnix()
			if err != nil {
				return
			}
			go answer(conn, lock, handle)
		}
	}()
	return path
}

func answer(conn *net.UnixConn, lock sync.Locker, handle Handler) {
	defer conn.Close()
	buf := make([]byte, protocol.MaxMessage)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		fds := receivedFDs(oob[:oobn])
		h, req, err := protocol.Decode(buf[:n])
		lock.Lock()
		var reply protocol.Body
		if err != nil {
			reply = err.(*protocol.Error) // Decode's errors all are
		} else {
			reply = handle(req, fds)
		}
		v := h.Version
		if hr, ok := reply.(*protocol.HelloReply); ok {
			v = hr.Version
		}
		msg, err := protocol.Encode(v, h.Seq, reply)
		lock.Unlock()
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err != nil {
			return
		}
		if _, err := conn.Write(msg); err != nil {
			return
		}
	}
}

func receivedFDs(oob []byte) []int {
	msgs, _ := unix.ParseSocketControlMessage(oob)
	var fds []int
	for _, m := range msgs {
		got, _ := unix.ParseUnixRights(&m)
		fds = append(fds, got...)
	}
	return fds
}

type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}
