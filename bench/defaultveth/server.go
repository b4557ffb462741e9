package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"

	"github.com/santa-offload/santa/bench/mcitems"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/dnsload"
	"github.com/santa-offload/santa/internal/dnstest"
	"github.com/santa-offload/santa/internal/netproc"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/rule"
)

// loopback is where the server also listens, for the loopback cells.
var loopback = netip.MustParseAddr("127.0.0.1")

// A server is the application measured, in the rig's server namespace,
// pinned to the server CPU, listening on the server veth's address and on
// loopback. Its requests are forms (internal/dnsload): both DNS and
// memcached's UDP frame put a 2-byte id first, which the client varies
// and the reply copies, so dnsload's closed-loop client and its
// byte-for-byte check serve both.
type server struct {
	name  string
	port  uint16
	forms []dnsload.Form
	// rule answers forms[i] with reply, the server's own (id 0).
	rule func(i int, reply []byte) rule.Rule
	pids func() []int
	stop func()
}

// startServer starts BIND (one thread, a name per item) or memcached (one
// worker thread, a key per item).
func startServer(kind string, c config, tmp string) (*server, error) {
	if kind == "memcached" {
		return startMemcached(c, tmp)
	}
	srv, err := dnstest.Start(dnstest.Config{Kind: dnstest.BIND, Netns: c.r.ServerNS(), Dir: tmp,
		Addrs: []netip.Addr{netip.MustParseAddr(rig.ServerIPv4), loopback}, Threads: 1, Names: c.items,
		Pin: true, CPU: c.serverCPU})
	if err != nil {
		return nil, err
	}
	forms := dnsload.Forms(dnstest.Questions(c.items)[:c.items], []dnsload.Shape{dnsload.RD})
	return &server{name: "bind", port: 53, forms: forms,
		rule: func(i int, reply []byte) rule.Rule { return dnsmsg.Rule(forms[i].Query(0), reply) },
		pids: srv.Pids, stop: func() { srv.Stop() }}, nil
}

// startMemcached runs Debian's memcached with UDP on and stores the keys.
func startMemcached(c config, tmp string) (*server, error) {
	const port = 11211
	argv := []string{"memcached", "-u", "root", "-l", rig.ServerIPv4 + "," + loopback.String(),
		"-p", strconv.Itoa(port), "-U", strconv.Itoa(port), "-t", "1", "-m", "64", "-c", "1024"}
	var conn net.Conn
	proc, err := netproc.Start(netproc.Spec{Name: "memcached", Argv: argv, Netns: c.r.ServerNS(),
		LogPath: tmp + "/memcached.log", Pin: true, CPU: c.serverCPU, Ready: func() error {
			var err error
			conn, err = c.r.Dial("tcp", port)
			return err
		}})
	if conn != nil {
		defer conn.Close()
	}
	if err != nil {
		return nil, err
	}
	if err := mcitems.Store(conn, c.items); err != nil {
		proc.Stop()
		return nil, err
	}
	return &server{name: "memcached", port: port, forms: mcitems.Forms(c.items),
		rule: func(i int, reply []byte) rule.Rule { return scenario.Rule(mcitems.Request, i, reply) },
		pids: proc.Pids, stop: func() { proc.Stop() }}, nil
}

// checkReplies checks the replies captured before Santa is involved: for
// memcached, that each is its key's value (a miss would mean the keys
// were not stored).
func (s *server) checkReplies(expect []dnsload.Expect) error {
	if s.name != "memcached" {
		return nil
	}
	for i, e := range expect {
		if err := mcitems.CheckReply(i, e.Reply); err != nil {
			return fmt.Errorf("capture: %w", err)
		}
	}
	return nil
}

// serverAvailable checks that the server kind is known and installed.
func serverAvailable(kind string) error {
	switch kind {
	case "bind":
		return dnstest.Available(dnstest.BIND)
	case "memcached":
		if _, err := exec.LookPath("memcached"); err != nil {
			return errors.New("memcached is not installed (make bench-deps)")
		}
		return nil
	}
	return fmt.Errorf("-server %q: want bind or memcached", kind)
}
