package daemon

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
)

// Clients that mean harm: what they send ends at worst their own
// connections, leaves santad holding nothing of theirs, and gains them
// nothing over other clients.

// Empty messages carrying a socket, sent over and over, each end its
// connection with EPROTO and leave santad no descriptor: the socket is
// really closed once its application closes it, and its port is free.
func TestEmptyMessagesWithDescriptors(t *testing.T) {
	e := newEnv(t, "he", "")
	before, err := e.d.OpenFDs()
	if err != nil {
		t.Fatal(err)
	}
	u := e.listenUDP(t)
	f := fileOf(t, u)
	for range 200 {
		c := dialRaw(t, e.d.Socket)
		c.sendEmpty(t, int(f.Fd()), int(f.Fd()))
		if perr, ok := c.reply(t).(*protocol.Error); !ok || perr.Code != syscall.EPROTO || !strings.Contains(perr.Message, "0 bytes") {
			t.Fatalf("an empty message gets %v; want EPROTO", perr)
		}
		c.closed(t)
		c.conn.Close()
	}
	waitFor(t, "santad to close what it was sent", 2*time.Second, func() bool {
		n, err := e.d.OpenFDs()
		return err == nil && n <= before
	})
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if held, err := e.d.HoldsSocket(st.Ino); err != nil || held {
		t.Fatalf("santad holds the socket: %v, %v", held, err)
	}
	port := portOf(u)
	f.Close()
	u.Close()
	err = e.ns.Do(func() error {
		again, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
		if err == nil {
			again.Close()
		}
		return err
	})
	if err != nil {
		t.Errorf("the port of the closed socket is still held: %v", err)
	}
}
