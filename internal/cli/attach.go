package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/procsock"
)

// attachOptions name a running server's socket by process and fd, or by
// the local port it is bound to (a UDP socket) or listens on (-tcp).
type attachOptions struct {
	pid   int
	fd    int
	port  uint
	tcp   bool
	addr  string
	netns string
}

func (o *attachOptions) flags(fs *flag.FlagSet) {
	fs.IntVar(&o.pid, "pid", 0, "the server's process `ID`")
	fs.IntVar(&o.fd, "fd", -1, "the socket's file descriptor `number` in that process")
	fs.UintVar(&o.port, "port", 0, "find the UDP socket bound to this local `PORT` (root only)")
	fs.BoolVar(&o.tcp, "tcp", false, "with -port: find the listening TCP socket instead")
	fs.StringVar(&o.addr, "addr", "", "with -port: the socket's local `ADDRESS` too")
	fs.StringVar(&o.netns, "netns", "", "with -port: look in the network namespace at `PATH` (/run/netns/NAME, /proc/PID/ns/net)")
}

func (o *attachOptions) run(ctx context.Context, e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	byFD, byPort := o.pid != 0 || o.fd >= 0, o.port != 0
	switch {
	case byFD == byPort:
		return usagef("give -pid and -fd, or -port")
	case byFD && (o.pid <= 0 || o.fd < 0):
		return usagef("give both -pid and -fd")
	case byFD && (o.addr != "" || o.netns != "" || o.tcp):
		return usagef("-tcp, -addr and -netns go with -port")
	case o.port > 0xffff:
		return usagef("-port %d is not a port", o.port)
	}
	pid, fd := o.pid, o.fd
	if byPort {
		var err error
		if pid, fd, err = o.find(); err != nil {
			return err
		}
	}
	sock, err := procsock.TakeFD(pid, fd)
	if err != nil {
		return err
	}
	// The server keeps its own fd: the service lives as long as it does.
	defer unix.Close(sock)
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	s, err := c.AttachFD(sock)
	if err != nil {
		return err
	}
	return e.show(newServiceView(s))
}

// find is the process and fd holding the UDP socket bound to o.port, or
// with -tcp the TCP socket listening on it.
func (o *attachOptions) find() (pid, fd int, err error) {
	if os.Geteuid() != 0 {
		return 0, 0, errors.New("-port needs root, to read every process's fds; use -pid and -fd")
	}
	var addr netip.Addr
	if o.addr != "" {
		if addr, err = netip.ParseAddr(o.addr); err != nil {
			return 0, 0, usagef("-addr %q is not an IP address", o.addr)
		}
	}
	what, find := "UDP socket bound to", procsock.BoundUDP
	if o.tcp {
		what, find = "TCP socket listening on", procsock.ListeningTCP
	}
	sockets, err := find(o.netns, uint16(o.port), addr)
	if err != nil {
		return 0, 0, err
	}
	switch len(sockets) {
	case 0:
		where := fmt.Sprintf("port %d", o.port)
		if addr.IsValid() {
			where = netip.AddrPortFrom(addr, uint16(o.port)).String()
		}
		return 0, 0, fmt.Errorf("no %s %s", what, where)
	case 1:
		return procsock.Holder(sockets[0].Inode)
	}
	var found []string
	for _, s := range sockets {
		found = append(found, fmt.Sprintf("%v (inode %d)", s.Local, s.Inode))
	}
	return 0, 0, fmt.Errorf("%d sockets match (%s port %d): %s; choose one with -addr, or use -pid and -fd",
		len(sockets), what, o.port, strings.Join(found, ", "))
}
