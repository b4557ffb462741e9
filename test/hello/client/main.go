// Command client sends hello's two kinds of request and prints each reply.
// The reply says who answered: "COMSYS" comes from the kernel (the rule),
// anything else from the application (test/hello's "you said: ...", the
// SDKs' hellos' "APP:...").
//
//	client [-server 10.77.0.1:7777] [-n 5] [-iface NAME-c]
//
// -iface attaches xdp_pass to the client's end of a veth pair first: veth
// hands the server's XDP_TX replies only to a peer that runs XDP.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/santa-offload/santa/internal/xdppass"
)

func main() {
	server := flag.String("server", "10.77.0.1:7777", "hello's UDP `address`")
	n := flag.Int("n", 5, "requests of each kind")
	iface := flag.String("iface", "", "veth `interface` to attach xdp_pass to")
	flag.Parse()
	if err := run(*server, *n, *iface); err != nil {
		fmt.Fprintf(os.Stderr, "client: %v\n", err)
		os.Exit(1)
	}
}

func run(server string, n int, iface string) error {
	if iface != "" {
		l, err := xdppass.Attach(iface)
		if err != nil {
			return err
		}
		defer l.Close()
	}
	conn, err := net.Dial("udp", server)
	if err != nil {
		return err
	}
	defer conn.Close()

	buf := make([]byte, 2048)
	for i := 0; i < n; i++ {
		for _, req := range []string{"Hello", "Hi there"} {
			if _, err := conn.Write([]byte(req)); err != nil {
				return err
			}
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			m, err := conn.Read(buf)
			if err != nil {
				return fmt.Errorf("no reply to %q: %w", req, err)
			}
			who := "the application"
			if string(buf[:m]) == "COMSYS" {
				who = "the kernel"
			}
			fmt.Printf("%-10q -> %-22q answered by %s\n", req, buf[:m], who)
		}
	}
	return nil
}
