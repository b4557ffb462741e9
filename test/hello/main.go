// Command hello is the paper's Listing 1 as a UDP server on the data plane
// alone, without santad: test/integration's server. Its socket installs one
// rule, and from then on the kernel answers the request "Hello" with
// "COMSYS" by itself. Every other request reaches hello as usual, which
// answers "you said: <payload>" and logs it. (An application's hello, on
// santad, is examples/go/hello.)
//
//	hello -iface eth0 [-iface eth1,eth2] [-listen 0.0.0.0:7777] [-big]
//
// -big adds a second rule, "Big" → 1400 bytes: more than native XDP on veth
// can grow a frame, so the TC program answers those (the fallback counter).
//
// On SIGINT or SIGTERM hello prints its counters as one line
// (STATS kernel_answered=N app_answered=M ... path_answered=N ...: the
// service's counters, then the data plane's UDP path counters), detaches,
// unpins and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

type config struct {
	listen string
	ifaces []string
	big    bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.listen, "listen", "0.0.0.0:7777", "UDP `address` to serve (0.0.0.0 serves IPv6 too)")
	flag.Func("iface", "`interface` to answer on in the kernel (repeatable, or a comma-separated list)", func(s string) error {
		for _, name := range strings.Split(s, ",") {
			if name = strings.TrimSpace(name); name != "" {
				cfg.ifaces = append(cfg.ifaces, name)
			}
		}
		return nil
	})
	flag.BoolVar(&cfg.big, "big", false, `also answer "Big" with a 1400-byte reply (answered by TC on veth)`)
	flag.Parse()
	if len(cfg.ifaces) == 0 || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "hello: %v\n", err)
		os.Exit(1)
	}
}

// helloRule is Listing 1: a request whose payload starts with "Hello" is
// answered with the 6 bytes "COMSYS".
var helloRule = rule.Rule{
	Condition:  rule.Condition{Offset: 0, Pattern: []byte("Hello")},
	Processors: []rule.Processor{rule.Put(0, []byte("COMSYS"))},
	ReplyLen:   6,
}

// bigRule is -big's: "Big" is answered with 1400 bytes "ABC...XYZABC...".
func bigRule() rule.Rule {
	reply := make([]byte, 1400)
	for i := range reply {
		reply[i] = 'A' + byte(i%26)
	}
	return rule.Rule{
		Condition:  rule.Condition{Offset: 0, Pattern: []byte("Big")},
		Processors: []rule.Processor{rule.Put(0, reply)},
		ReplyLen:   uint16(len(reply)),
	}
}

func run(ctx context.Context, cfg config) error {
	addr, err := net.ResolveUDPAddr("udp", cfg.listen)
	if err != nil {
		return fmt.Errorf("resolving -listen: %w", err)
	}
	conn, err := net.ListenUDP("udp", addr)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	defer conn.Close()

	// Pinned: programs, maps and links would outlive hello, so a clean exit
	// detaches and unpins (deferred calls run last to first). Two rules need
	// no room for a million.
	dp, err := datapath.Open(datapath.Options{MaxRules: 16, MaxServices: 4})
	if err != nil {
		return fmt.Errorf("opening the data plane: %w", err)
	}
	defer dp.Close()
	defer dp.Unpin()
	for _, iface := range cfg.ifaces {
		att, err := dp.Attach(iface)
		if err != nil {
			return err
		}
		defer dp.Detach(iface)
		fmt.Printf("attached iface=%s xdp=%s tc=%t\n", att.Interface, att.XDP, att.TC)
	}

	// The rules belong to this very socket: the kernel finds it by its cookie.
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var svc model.ServiceID
	var svcErr error
	if err := raw.Control(func(fd uintptr) { svc, svcErr = dp.AddSocket(int(fd)) }); err != nil {
		return err
	}
	if svcErr != nil {
		return fmt.Errorf("registering the socket: %w", svcErr)
	}
	helloID, err := dp.AddRule(svc, helloRule)
	if err != nil {
		return fmt.Errorf("adding the Hello rule: %w", err)
	}
	var bigID model.RuleID
	if cfg.big {
		if bigID, err = dp.AddRule(svc, bigRule()); err != nil {
			return fmt.Errorf("adding the Big rule: %w", err)
		}
	}
	fmt.Printf("ready listen=%s\n", conn.LocalAddr())

	answered, serveErr := serve(ctx, conn)

	st, err := dp.ServiceStats(svc)
	if err != nil {
		return errors.Join(serveErr, err)
	}
	hello, err := dp.RuleStats(helloID)
	if err != nil {
		return errors.Join(serveErr, err)
	}
	paths, err := dp.PathStats()
	if err != nil {
		return errors.Join(serveErr, err)
	}
	line := fmt.Sprintf("STATS kernel_answered=%d app_answered=%d passed=%d fallback=%d tc_checksum=%d tc_too_long=%d tc_no_xdp=%d bad_csum=%d hello_hits=%d",
		st.Matched, answered, st.Passed, st.Fallback(), st.TCChecksum, st.TCTooLong, st.TCNoXDP, st.BadCsum, hello.Hits)
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if !strings.HasPrefix(p, "tcp_") { // hello serves UDP
			line += fmt.Sprintf(" path_%s=%d", p, paths[p])
		}
	}
	if cfg.big {
		big, err := dp.RuleStats(bigID)
		if err != nil {
			return errors.Join(serveErr, err)
		}
		line += fmt.Sprintf(" big_hits=%d", big.Hits)
	}
	fmt.Println(line)
	return serveErr
}

// serve answers what the kernel did not, until ctx is done, and returns how
// many requests it answered.
func serve(ctx context.Context, conn *net.UDPConn) (int, error) {
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 65536)
	answered := 0
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if ctx.Err() != nil {
			return answered, nil
		}
		if err != nil {
			return answered, fmt.Errorf("reading: %w", err)
		}
		peer := netip.AddrPortFrom(from.Addr().Unmap(), from.Port()) // IPv4 on a dual-stack socket
		fmt.Printf("request from %s: %q\n", peer, buf[:n])
		reply := append([]byte("you said: "), buf[:n]...)
		if _, err := conn.WriteToUDPAddrPort(reply, from); err != nil {
			fmt.Fprintf(os.Stderr, "hello: replying to %s: %v\n", from, err)
			continue
		}
		answered++
	}
}
