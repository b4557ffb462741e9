// Command memcached is the paper's memcached scenario (section 5.6) in the
// rig (bench/rig.sh): memcached from Debian's package, one worker thread,
// UDP on, pinned to the server CPU, holds -keys keys like Facebook's USR
// pool (16 and 21 bytes, 2-byte values). The XDP generator (bench/gen)
// sends UDP GETs with power-law popularity at a sweep of offered loads;
// every reply is checked against memcached's own bytes. Santa then answers
// the top n keys on memcached's very socket (the paper's Figure 7b),
// with the replies memcached gave, its UDP request id copied from each
// request. The mechanics are bench/scenario's, shared with bench/dns.
//
// Needs root and the package memcached (make bench-deps). Everything it
// starts or creates is removed on exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/mcitems"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/netproc"
)

const port = 11211

func main() {
	f := scenario.RegisterFlags(scenario.Defaults{Rig: "sbmc", Popularity: "zipf:1", Offload: "0,1000,10000,all",
		Rates: "100000,200000,300000,1000000,0"})
	keys := flag.Int("keys", 100000, "keys stored")
	flag.Parse()
	err := fmt.Errorf("-keys %d: want 1 to %d", *keys, 1<<20)
	if *keys >= 1 && *keys <= 1<<20 {
		var c scenario.Config
		c, err = f.Config(*keys, port, mcitems.Request)
		c.Check = mcitems.CheckReply
		c.LearnKeyOffset = 2 // a request's bytes after its UDP frame's request id
		if err == nil {
			err = c.Rig.Run("memcached", c.ServerCPU, c.ClientCPU, func(ctx context.Context, tmp string) error { return run(ctx, c, tmp) })
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "memcached:", err)
		os.Exit(1)
	}
}

// run starts memcached, stores the keys and runs the sweeps.
func run(ctx context.Context, c scenario.Config, tmp string) error {
	argv := []string{"memcached", "-u", "root", "-l", rig.ServerIPv4, "-p", strconv.Itoa(port), "-U", strconv.Itoa(port),
		"-t", "1", "-m", "2048", "-c", "1024"}
	var conn net.Conn
	t0 := time.Now()
	srv, err := netproc.Start(netproc.Spec{Name: "memcached", Argv: argv, Netns: c.Rig.ServerNS(), LogPath: tmp + "/memcached.log",
		Pin: true, CPU: c.ServerCPU, Ready: func() error {
			var err error
			conn, err = c.Rig.Dial("tcp", port)
			return err
		}})
	if err != nil {
		if conn != nil { // ready, but pinning the server failed
			conn.Close()
		}
		return err
	}
	defer srv.Stop()
	err = mcitems.Store(conn, c.Items)
	conn.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "memcached: %d keys stored (in %v)\n", c.Items, time.Since(t0).Round(time.Millisecond))
	b, err := scenario.Open(c)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Run(ctx, "memcached/keys="+dp.Human(c.Items))
}
