package datapath

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// restartRig is a dual-stack TCP listener registered with a pinned data
// plane, in a network namespace of its own, whose process can be
// restarted.
type restartRig struct {
	ln     net.Listener
	opts   Options
	first  *Datapath
	second *Datapath // after restart
	svc    model.ServiceID
	info   model.SocketInfo
}

// newRestartRig registers the listener with a first data plane that
// answers hotReq with hotReply. The caller leaves the namespace with back.
func newRestartRig(t *testing.T) (r *restartRig, back func()) {
	t.Helper()
	ln, back := listenInNewNetns(t, "tcp", "[::]:0")
	var err error
	dir := filepath.Join(t.TempDir(), "bpffs", "santa")
	r = &restartRig{ln: ln, opts: Options{PinPath: dir, MaxRules: 64, MaxServices: 4}}
	if r.first, err = Open(r.opts); err != nil {
		back()
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Dir(dir), 0) })
	control(t, ln.(*net.TCPListener))(func(fd uintptr) { r.svc, err = r.first.AddSocket(int(fd)) })
	if err == nil {
		_, err = r.first.AddRule(r.svc, tcpRule(hotReq, hotReply))
	}
	if err != nil {
		back()
		t.Fatal(err)
	}
	r.info, _ = r.first.Service(r.svc)
	return r, back
}

// restart closes the first process's data plane as if it was killed (pins
// and links stay) and opens the next one, which restores the listener with
// hotReq answered by reply from now on, and takes the connections over.
func (r *restartRig) restart(t *testing.T, reply []byte) model.HandOver {
	t.Helper()
	r.first.Close()
	opts := r.opts
	opts.KeepLinks = true
	second, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close(); second.Unpin() })
	r.second = second
	if err := second.RestoreService(r.svc, r.info, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := second.AddRule(r.svc, tcpRule(hotReq, reply)); err != nil {
		t.Fatal(err)
	}
	second.EndRestore()
	start := time.Now()
	got, err := second.HandOverConnections()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("handed over %+v in %v", got, time.Since(start))
	return got
}

// addr is the listener's address on loopback for network, tcp4 or tcp6.
func (r *restartRig) addr(network string) string {
	port := r.ln.Addr().(*net.TCPAddr).AddrPort().Port()
	if network == "tcp6" {
		return netip.AddrPortFrom(netip.IPv6Loopback(), port).String()
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String()
}

// A restarted process takes the earlier data plane's connections over: an
// idle one (IPv6) is answered by the new rules from then on, a passing one
// (IPv4) stays the application's, one with data the application has not
// read yet stays in the earlier data plane, loses nothing, and passes
// everything until, idle, it is released; the earlier data plane goes away
// with it, while the connection lives on.
func TestHandOverConnections(t *testing.T) {
	r, back := newRestartRig(t)
	defer back()
	firstSockets, _ := r.first.tcp.objs.TcpConns.Info()
	firstSocketsID, _ := firstSockets.ID()
	accept := func(network string) (client, server net.Conn) {
		client, err := net.Dial(network, r.addr(network))
		if err != nil {
			t.Fatal(err)
		}
		server, err = r.ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close(); server.Close() })
		return client, server
	}
	idle, _ := accept("tcp6")
	exchange(t, idle, []byte(hotReq), hotReply)
	passing, passingApp := accept("tcp4")
	passing.Write([]byte("miss\n"))
	exchange(t, passingApp, nil, []byte("miss\n"))
	unread, unreadApp := accept("tcp6")
	unread.Write([]byte("unread\n"))
	time.Sleep(50 * time.Millisecond) // through the verdict, into the psock

	newReply := []byte("NEW!\n")
	if got := r.restart(t, newReply); got != (model.HandOver{Moved: 1, Released: 1, Left: 1}) {
		t.Fatalf("handed over %+v; want one connection each", got)
	}
	exchange(t, idle, []byte(hotReq), newReply)
	passing.Write([]byte(hotReq))
	exchange(t, passingApp, nil, []byte(hotReq))
	exchange(t, unreadApp, nil, []byte("unread\n"))
	unread.Write([]byte(hotReq))
	exchange(t, unreadApp, nil, []byte(hotReq))
	fresh, _ := accept("tcp4")
	exchange(t, fresh, []byte(hotReq), newReply)

	// The connection left behind holds the earlier data plane, until it
	// is released, idle now: it stays the application's.
	if m, err := ebpf.NewMapFromID(firstSocketsID); err != nil {
		t.Fatalf("the earlier sockhash is gone while a connection is in it: %v", err)
	} else {
		m.Close()
	}
	for _, want := range []model.HandOver{{Released: 1}, {}} { // then nothing to do
		if got, err := r.second.ReleaseLeftConnections(); err != nil || got != want {
			t.Fatalf("released %+v, %v; want %+v", got, err, want)
		}
	}
	unread.Write([]byte(hotReq))
	exchange(t, unreadApp, nil, []byte(hotReq))
	if !eventually(5*time.Second, 50*time.Millisecond, func() bool {
		m, err := ebpf.NewMapFromID(firstSocketsID)
		if err != nil {
			return true
		}
		m.Close()
		return false
	}) {
		t.Fatal("the earlier sockhash outlived the release of its last connection")
	}
}

// Connections (IPv4 and IPv6) busy with requests while the process
// restarts: every request is answered once, in order, by the earlier
// rules, the new ones or the application (a connection left passing), and
// nothing stays unread.
func TestHandOverUnderTraffic(t *testing.T) {
	r, back := newRestartRig(t)
	defer back()
	app := &appServer{ln: r.ln, accepted: make(chan struct{}, 64)}
	go app.serve()
	newReply := []byte("NEW!\n")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	replies := make(chan map[string]int, 16)
	for i := range 16 {
		network := []string{"tcp4", "tcp6"}[i%2]
		c, err := net.Dial(network, r.addr(network))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		<-app.accepted
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen, err := hotLoop(c, stop, [][]byte{hotReply, newReply, []byte("APP:" + hotReq)})
			if err != nil {
				t.Error(err)
			}
			replies <- seen
		}()
	}
	time.Sleep(100 * time.Millisecond)
	got := r.restart(t, newReply)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(replies)
	total := map[string]int{}
	for seen := range replies {
		for k, n := range seen {
			total[k] += n
		}
	}
	t.Logf("replies %v", total)
	if got.Moved+got.Left != 16 || total[string(newReply)] == 0 {
		t.Errorf("handed over %+v, replies %v; want all 16 connections, and new replies", got, total)
	}
	rig := &tcpRig{addr: r.addr("tcp4")}
	rig.expectNothingUnread(t)
}

// hotLoop sends hotReq on c until stop, one at a time, and counts the
// replies by kind; each must be one of want, whole, and once a connection
// got the new rule's reply (the last but one of want) or the application's
// (the last), it never goes back.
func hotLoop(c net.Conn, stop <-chan struct{}, want [][]byte) (map[string]int, error) {
	seen := map[string]int{}
	rank := 0
	for {
		select {
		case <-stop:
			return seen, nil
		default:
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(hotReq)); err != nil {
			return seen, err
		}
		got, err := readOneOf(c, want)
		if err != nil {
			return seen, err
		}
		if got < rank {
			return seen, fmt.Errorf("reply %q after %q", want[got], want[rank])
		}
		rank = got
		seen[string(want[got])]++
	}
}

// readOneOf reads one of the candidate replies, which differ in their first
// byte, and returns its index.
func readOneOf(c net.Conn, candidates [][]byte) (int, error) {
	first := make([]byte, 1)
	if _, err := io.ReadFull(c, first); err != nil {
		return 0, err
	}
	for i, want := range candidates {
		if want[0] != first[0] {
			continue
		}
		rest := make([]byte, len(want)-1)
		if _, err := io.ReadFull(c, rest); err != nil {
			return 0, err
		}
		if !bytes.Equal(rest, want[1:]) {
			return 0, fmt.Errorf("reply %q%q, want %q", first, rest, want)
		}
		return i, nil
	}
	return 0, fmt.Errorf("reply starts with %q", first)
}
