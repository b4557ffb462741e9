package datapath

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// MaxConnections (65,536 by default) bounds the connections under Santa for
// the whole host, and nothing bounds one service's share: a local client
// of santad that attached its own listener fills every place with idle
// connections to it (held open, or just left in its accept queue), and
// every other uid's services lose their TCP offload (tcp_conn_full) for as
// long as it holds them. santad's quotas count services, rules and bytes,
// not connections.
func TestTCPOneServiceCannotTakeEveryConnectionPlace(t *testing.T) {
	const places = 8
	ln, back := listenInNewNetns(t, "tcp4", "127.0.0.1:0")
	defer back()
	d := openTestWith(t, Options{MaxRules: 1 << 14, MaxServices: 256, MaxConnections: places})
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false)
	other, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	rigs := make([]*tcpRig, 2)
	for i, l := range []net.Listener{ln, other} {
		app := &appServer{ln: l, accepted: make(chan struct{}, places+1)}
		rigs[i] = &tcpRig{d: d, ln: l.(*net.TCPListener), app: app, addr: l.Addr().String(), back: back}
		rigs[i].register(t)
		rigs[i].addRules(t)
		go app.serve()
	}
	hostile, victim := rigs[0], rigs[1]
	for range places {
		hostile.dial(t, "tcp4") // idle, held
	}
	c := victim.dial(t, "tcp4")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(hotReq)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(hotReply))
	n, err := io.ReadFull(c, got)
	if err != nil || !bytes.Equal(got, hotReply) {
		ps, _ := d.PathStats()
		t.Fatalf("another service's connection: %q, %v; want the kernel's %q (tcp_conn_full %d)", got[:n], err, hotReply, ps["tcp_conn_full"])
	}
}
