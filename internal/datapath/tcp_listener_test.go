package datapath

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// Which listener a connection is Santa's under: the socket that accepted
// it, not whatever registered socket has its address and port
// (registered_listeners). In each test one listener is registered with a
// rule answering hotReq with stolenReply, and another socket, not
// registered, accepts connections on the same port: those must reach that
// socket's application.

var stolenReply = []byte("STOLEN\n")

// sockopt is a socket option to set before bind: level, name and value.
type sockopt struct{ level, name, value int }

var (
	v6Only    = sockopt{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1}
	reuseAddr = sockopt{unix.SOL_SOCKET, unix.SO_REUSEADDR, 1}
)

// listenWith listens on addr with opts set before bind, until the test ends.
func listenWith(t *testing.T, network, addr string, opts ...sockopt) *net.TCPListener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		rc.Control(func(fd uintptr) {
			for _, o := range opts {
				if err == nil {
					err = unix.SetsockoptInt(int(fd), o.level, o.name, o.value)
				}
			}
		})
		return err
	}}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.TCPListener)
}

// registerStealing registers ln with a rule answering hotReq with
// stolenReply.
func registerStealing(t *testing.T, d *Datapath, ln *net.TCPListener) model.ServiceID {
	t.Helper()
	var id model.ServiceID
	var err error
	control(t, ln)(func(fd uintptr) { id, err = d.AddSocket(int(fd)) })
	if err == nil {
		_, err = d.AddRule(id, tcpRule(hotReq, stolenReply))
	}
	if err != nil {
		t.Fatalf("registering the listener: %v", err)
	}
	return id
}

// expectApplicationAnswers serves ln with an application and dials addr,
// which ln is to accept: hotReq is the application's to answer.
func expectApplicationAnswers(t *testing.T, ln *net.TCPListener, network, addr string) {
	t.Helper()
	app := &appServer{ln: ln, accepted: make(chan struct{}, 16)}
	go app.serve()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-app.accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the application did not accept the connection")
	}
	exchange(t, c, []byte(hotReq), []byte("APP:"+hotReq))
}

// enterLoopbackNetns enters a network namespace of its own with loopback
// up; the caller leaves it with back.
func enterLoopbackNetns(t *testing.T) (back func()) {
	t.Helper()
	back = enterNewNetns(t)
	if err := exec("ip", "link", "set", "lo", "up"); err != nil {
		back()
		t.Fatal(err)
	}
	return back
}

// An IPV6_V6ONLY listener on [::]:P is registered; another socket (any
// uid's, no SO_REUSE* needed) listens on 0.0.0.0:P. The IPv4 connections
// are that socket's: the registered one's rules do not answer them, and
// still answer its own IPv6 connections.
func TestTCPV6OnlyListenerDoesNotServeIPv4Listener(t *testing.T) {
	back := enterLoopbackNetns(t)
	defer back()
	d := openTest(t)
	registered := listenWith(t, "tcp6", "[::]:0", v6Only)
	port := strconv.Itoa(registered.Addr().(*net.TCPAddr).Port)
	other := listenWith(t, "tcp4", "0.0.0.0:"+port)
	registerStealing(t, d, registered)
	expectApplicationAnswers(t, other, "tcp4", "127.0.0.1:"+port)

	go (&appServer{ln: registered, accepted: make(chan struct{}, 16)}).serve()
	own, err := net.Dial("tcp6", "[::1]:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	exchange(t, own, []byte(hotReq), stolenReply)
}

// A registered listener stops listening without closing (shutdown with
// SHUT_RD disconnects it): its port stays bound, it stays registered, and
// no close is seen. Another socket (SO_REUSEADDR, as Go and most servers
// set) then listens on the same address and port: its connections are its
// own, not answered by the registered listener's rules.
func TestTCPListenerThatStoppedListeningDoesNotServeNext(t *testing.T) {
	back := enterLoopbackNetns(t)
	defer back()
	d := openTest(t)
	registered := listenWith(t, "tcp4", "127.0.0.1:0", reuseAddr)
	port := strconv.Itoa(registered.Addr().(*net.TCPAddr).Port)
	registerStealing(t, d, registered)
	control(t, registered)(func(fd uintptr) {
		if err := unix.Shutdown(int(fd), unix.SHUT_RD); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	})
	next := listenWith(t, "tcp4", "127.0.0.1:"+port, reuseAddr)
	expectApplicationAnswers(t, next, "tcp4", "127.0.0.1:"+port)
}

// A registered listener that stops listening and listens again is not
// the listener registered any more (its address may differ): its new
// connections are the application's, until it is registered again.
func TestTCPListenerListeningAgainIsNotServed(t *testing.T) {
	back := enterLoopbackNetns(t)
	defer back()
	d := openTest(t)
	// Bound to a port it asked for, which it keeps when disconnected (one
	// the kernel chose, it would give back).
	probe := listenWith(t, "tcp4", "127.0.0.1:0")
	addr := probe.Addr().String()
	probe.Close()
	ln := listenWith(t, "tcp4", addr)
	svc := registerStealing(t, d, ln)
	control(t, ln)(func(fd uintptr) {
		if err := unix.Shutdown(int(fd), unix.SHUT_RD); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if err := unix.Listen(int(fd), 16); err != nil {
			t.Fatalf("listening again: %v", err)
		}
	})
	expectApplicationAnswers(t, ln, "tcp4", addr)

	if err := d.RemoveService(svc); err != nil {
		t.Fatal(err)
	}
	registerStealing(t, d, ln)
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange(t, c, []byte(hotReq), stolenReply)
}
