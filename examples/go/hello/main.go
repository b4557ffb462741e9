// Command hello is the paper's Listing 1 on Santa's Go client: a UDP server
// whose socket installs one rule, so that the kernel answers the request
// "Hello" with "COMSYS" without waking it. Every other request reaches
// hello, which answers "APP:" + the request. On SIGINT or SIGTERM it reads
// its rule's counter, prints
//
//	STATS kernel=<requests the kernel answered> app=<requests hello answered>
//
// detaches and exits.
//
//	hello [-socket /run/santa/santa.sock] [address]   (default 127.0.0.1:7777)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

func main() {
	socket := flag.String("socket", client.DefaultSocket, "santad's `path`")
	flag.Parse()
	addr := "127.0.0.1:7777"
	if flag.NArg() > 0 {
		addr = flag.Arg(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *socket, addr); err != nil {
		fmt.Fprintf(os.Stderr, "hello: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, socket, addr string) error {
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	conn, err := net.ListenUDP("udp", udpAddr)
	if err != nil {
		return err
	}
	defer conn.Close()
	c, err := client.Dial(socket)
	if err != nil {
		return err
	}
	defer c.Close()
	svc, err := c.Attach(conn)
	if err != nil {
		return err
	}
	// Listing 1: "Hello" at offset 0 is answered with the 6 bytes "COMSYS".
	ids, err := c.AddRules(svc.ServiceID, []rule.Rule{{
		Condition:  rule.Condition{Offset: 0, Pattern: []byte("Hello")},
		Processors: []rule.Processor{rule.Put(0, []byte("COMSYS"))},
		ReplyLen:   6,
	}})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "hello: serving %s, service %d, rule %d\n", conn.LocalAddr(), svc.ServiceID, ids[0])

	app, err := serve(ctx, conn)
	if err != nil {
		return err
	}
	var kernel uint64
	for counters, err := range c.RuleStats(svc.ServiceID) {
		if err != nil {
			return err
		}
		if counters.RuleID == ids[0] {
			kernel = counters.Hits
		}
	}
	fmt.Printf("STATS kernel=%d app=%d\n", kernel, app)
	return c.Detach(svc.ServiceID)
}

// serve answers what reaches the application, "APP:" + the request, until
// ctx is done, and returns how many requests it answered.
func serve(ctx context.Context, conn *net.UDPConn) (int, error) {
	// A deadline in the past wakes the read; closing the socket would end
	// the service before its counter is read.
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	answered := 0
	buf := make([]byte, 65535)
	for {
		n, peer, err := conn.ReadFromUDP(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			return answered, nil
		}
		if err != nil {
			return answered, err
		}
		if _, err := conn.WriteToUDP(append([]byte("APP:"), buf[:n]...), peer); err != nil {
			return answered, err
		}
		answered++
	}
}
