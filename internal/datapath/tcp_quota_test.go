package datapath

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/model"
)

// registerAs makes the rig's listener a service of owner's (AddService,
// as santad registers a client's).
func (r *tcpRig) registerAs(t *testing.T, owner *model.ConnOwner) {
	t.Helper()
	info, err := model.InspectSocket(int(fdOf(t, r.ln)))
	if err != nil {
		t.Fatal(err)
	}
	control(t, r.ln)(func(fd uintptr) { r.svc, err = r.d.AddService(int(fd), info, owner) })
	if err != nil {
		t.Fatalf("registering the listener: %v", err)
	}
}

func fdOf(t *testing.T, ln *net.TCPListener) uintptr {
	t.Helper()
	var got uintptr
	control(t, ln)(func(fd uintptr) { got = fd })
	return got
}

// placesBecome waits until uid holds want places (connections, memcached
// streams).
func placesBecome(t *testing.T, d *Datapath, uid uint32, conns, mc uint32) {
	t.Helper()
	var got model.ConnPlaces
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, _ = d.ConnectionPlaces(uid); got.Conns == conns && got.Memcached == mc {
			return
		}
	}
	t.Fatalf("uid %d holds %d connection places and %d memcached ones; want %d and %d", uid, got.Conns, got.Memcached, conns, mc)
}

// MaxConnections (65,536 by default) bounds the connections under Santa for
// the whole host. Without a bound on one uid's share, a local client of
// santad that attached its own listener fills every place with idle
// connections to it (held open, or just left in its accept queue), and
// every other uid's services lose their TCP offload (tcp_conn_full) for as
// long as it holds them. Each uid's listeners take at most its quota of
// places (model.ConnOwner): beyond it, its new connections are the
// application's alone (tcp_conn_quota), and another uid's still get one.
func TestTCPOneServiceCannotTakeEveryConnectionPlace(t *testing.T) {
	const places, quota = 8, 4
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
		rigs[i].registerAs(t, &model.ConnOwner{UID: 1000 + uint32(i), Limit: quota})
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
	ps, _ := d.PathStats()
	if err != nil || !bytes.Equal(got, hotReply) {
		t.Fatalf("another uid's connection: %q, %v; want the kernel's %q (tcp_conn_full %d, tcp_conn_quota %d)",
			got[:n], err, hotReply, ps["tcp_conn_full"], ps["tcp_conn_quota"])
	}
	if ps["tcp_conn_quota"] != places-quota {
		t.Errorf("tcp_conn_quota %d, want %d", ps["tcp_conn_quota"], places-quota)
	}
	placesBecome(t, d, 1000, quota, 0)
	placesBecome(t, d, 1001, 1, 0)
}

// A connection's place is given back on every way it leaves: its close
// (from either end), its listener's end (released idle, or left busy until
// it closes), an adopted one's close, a memcached one's stream state with
// the socket's release. The count returns to 0: it never leaks.
func TestTCPConnectionPlacesReturn(t *testing.T) {
	const uid, n = 1000, 12
	owner := &model.ConnOwner{UID: uid, Limit: 2 * n}
	ln, back := listenInNewNetns(t, "tcp4", "127.0.0.1:0")
	defer back()
	app := &appServer{ln: ln, accepted: make(chan struct{}, 4*n)}
	r := &tcpRig{d: openTest(t), ln: ln.(*net.TCPListener), app: app, addr: ln.Addr().String(), back: back}
	r.registerAs(t, owner)
	r.addRules(t)
	go app.serve()

	// Connections that are answered, then closed by the client.
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = r.dial(t, "tcp4")
		exchange(t, conns[i], []byte(hotReq), hotReply)
	}
	placesBecome(t, r.d, uid, n, 0)
	for _, c := range conns {
		c.Close()
	}
	placesBecome(t, r.d, uid, 0, 0)

	// Idle ones, then the listener's end: they are released.
	for i := range conns {
		conns[i] = r.dial(t, "tcp4")
	}
	placesBecome(t, r.d, uid, n, 0)
	if err := r.d.RemoveService(r.svc); err != nil {
		t.Fatal(err)
	}
	placesBecome(t, r.d, uid, 0, 0)

	// Registered again: those (accepted before) adopted, within the quota.
	r.registerAs(t, owner)
	r.addRules(t)
	got, err := r.adopt()
	if err != nil || got.Adopted != n {
		t.Fatalf("adopted %d (skipped %v), %v; want %d", got.Adopted, got.Skipped, err, n)
	}
	placesBecome(t, r.d, uid, n, 0)
	exchange(t, conns[0], []byte(hotReq), hotReply)
	for _, c := range conns {
		c.Close()
	}
	placesBecome(t, r.d, uid, 0, 0)

	// A memcached service's: the stream states too.
	if err := r.d.SetParser(r.svc, model.Parser{Kind: model.ParserMemcached, Domain: r.svc}); err != nil {
		t.Fatal(err)
	}
	for i := range conns {
		conns[i] = r.dial(t, "tcp4")
	}
	placesBecome(t, r.d, uid, n, n)
	for _, c := range conns {
		c.Close()
	}
	placesBecome(t, r.d, uid, 0, 0)
	if err := r.d.RemoveService(r.svc); err != nil {
		t.Fatal(err)
	}
	placesBecome(t, r.d, uid, 0, 0)
}

// Adopting counts against the quota too: a listener's earlier connections
// beyond it stay the application's.
func TestTCPAdoptWithinConnectionQuota(t *testing.T) {
	const uid, quota, n = 1000, 3, 5
	ln, back := listenInNewNetns(t, "tcp4", "127.0.0.1:0")
	defer back()
	app := &appServer{ln: ln, accepted: make(chan struct{}, n)}
	r := &tcpRig{d: openTest(t), ln: ln.(*net.TCPListener), app: app, addr: ln.Addr().String(), back: back}
	go app.serve()
	for range n {
		r.dial(t, "tcp4")
	}
	r.registerAs(t, &model.ConnOwner{UID: uid, Limit: quota})
	got, err := r.adopt()
	if err != nil || got.Adopted != quota || len(got.Skipped) != n-quota {
		t.Fatalf("adopted %d, skipped %v, %v; want %d adopted, %d skipped", got.Adopted, got.Skipped, err, quota, n-quota)
	}
	placesBecome(t, r.d, uid, quota, 0)
	// A raised limit lets new ones in.
	r.d.SetConnectionLimit(uid, quota+1)
	r.dial(t, "tcp4")
	placesBecome(t, r.d, uid, quota+1, 0)
}
