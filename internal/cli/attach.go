package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/procsock"
)

// attachOptions name a running server's socket by process and fd, or by
// the local port it is bound to (UDP: every socket bound to it) or
// listens on (-tcp).
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
	fs.UintVar(&o.port, "port", 0, "find the UDP sockets bound to this local `PORT`, and attach every one (root only)")
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
	if byFD {
		v, err := o.attach(ctx, e, held{pid: o.pid, fd: o.fd})
		if err != nil {
			return err
		}
		return e.show(v)
	}
	found, err := o.find()
	if err != nil {
		return err
	}
	var views []serviceView
	for _, h := range found {
		v, err := o.attach(ctx, e, h)
		if err != nil {
			if len(views) > 0 {
				e.show(servicesView{Services: views}) // what is attached stays attached
			}
			return fmt.Errorf("%s: %w", h.local, err)
		}
		views = append(views, v)
	}
	if len(views) == 1 {
		return e.show(views[0])
	}
	fmt.Fprintf(e.stderr, "santactl: attach: %d UDP sockets are bound to port %d: attached every one\n", len(views), o.port)
	return e.show(servicesView{Services: views})
}

// held is a socket as a process holds it.
type held struct {
	pid, fd int
	local   netip.AddrPort // where it is bound (-port only)
	inode   uint64         // the socket found (-port only)
	user    procsock.User  // whom its holder ran as (-port only: oneUser)
}

// attach attaches the socket h names. One found by -port is taken only
// if its holder still runs as the user oneUser saw and the fd is still
// that socket: since /proc was read, the process may have closed it, or
// ended and had its pid given to another user's process
// (procsock.TakeSocket).
func (o *attachOptions) attach(ctx context.Context, e *env, h held) (serviceView, error) {
	var sock int
	var err error
	if h.inode != 0 {
		sock, err = procsock.TakeSocket(procsock.Held{PID: h.pid, FD: h.fd}, h.inode, func(pid int) error {
			u, err := procsock.UserOf(pid)
			if err == nil && u != h.user {
				err = fmt.Errorf("process %d runs as %v, not as %v, its user when found", pid, u, h.user)
			}
			return err
		})
	} else {
		sock, err = procsock.TakeFD(h.pid, h.fd)
	}
	if err != nil {
		return serviceView{}, err
	}
	// The server keeps its own fd: the service lives as long as it does.
	defer unix.Close(sock)
	c, err := e.connect(ctx)
	if err != nil {
		return serviceView{}, err
	}
	s, err := c.AttachFD(sock)
	if err != nil {
		return serviceView{}, err
	}
	return newServiceView(s), nil
}

// find is every process and fd holding a UDP socket bound to o.port (a
// server with several threads has a SO_REUSEPORT group of them, or one
// per address), or with -tcp the one TCP socket listening on it.
func (o *attachOptions) find() ([]held, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("-port needs root, to read every process's fds; use -pid and -fd")
	}
	var addr netip.Addr
	if o.addr != "" {
		var err error
		if addr, err = netip.ParseAddr(o.addr); err != nil {
			return nil, usagef("-addr %q is not an IP address", o.addr)
		}
	}
	what, find := "UDP socket bound to", procsock.BoundUDP
	if o.tcp {
		what, find = "TCP socket listening on", procsock.ListeningTCP
	}
	sockets, err := find(o.netns, uint16(o.port), addr)
	if err != nil {
		return nil, err
	}
	switch {
	case len(sockets) == 0:
		where := fmt.Sprintf("port %d", o.port)
		if addr.IsValid() {
			where = netip.AddrPortFrom(addr, uint16(o.port)).String()
		}
		return nil, fmt.Errorf("no %s %s", what, where)
	case o.tcp && len(sockets) > 1:
		var found []string
		for _, s := range sockets {
			found = append(found, fmt.Sprintf("%v (inode %d)", s.Local, s.Inode))
		}
		return nil, fmt.Errorf("%d sockets match (%s port %d): %s; choose one with -addr, or use -pid and -fd",
			len(sockets), what, o.port, strings.Join(found, ", "))
	}
	inodes := make([]uint64, len(sockets))
	for i, s := range sockets {
		inodes[i] = s.Inode
	}
	holders, err := procsock.Holders(inodes)
	if err != nil {
		return nil, err
	}
	out := make([]held, len(sockets))
	for i, s := range sockets {
		h, ok := holders[s.Inode]
		if !ok {
			return nil, fmt.Errorf("no process holds the %s %v (inode %d)", what, s.Local, s.Inode)
		}
		out[i] = held{pid: h.PID, fd: h.FD, local: s.Local, inode: s.Inode}
	}
	if err := oneUser(out); err != nil {
		return nil, fmt.Errorf("port %d: %w", o.port, err)
	}
	return out, nil
}

// oneUser refuses sockets held by processes of more than one user: any
// local user may bind the port beside the server (at its address with
// SO_REUSEADDR, which BIND and memcached set, or on loopback beside a
// wildcard), and root's attach would make that user's socket a service of
// root's. The error names each user's sockets. It notes each holder's
// user in sockets.
func oneUser(sockets []held) error {
	by := map[procsock.User][]string{}
	for i, h := range sockets {
		u, err := procsock.UserOf(h.pid)
		if err != nil {
			return fmt.Errorf("the process holding %v: %w", h.local, err)
		}
		sockets[i].user = u
		by[u] = append(by[u], fmt.Sprintf("%v (pid %d)", h.local, h.pid))
	}
	if len(by) < 2 {
		return nil
	}
	var users []string
	for _, u := range slices.SortedFunc(maps.Keys(by), func(a, b procsock.User) int { return slices.Compare(a[:], b[:]) }) {
		users = append(users, fmt.Sprintf("%v: %s", u, strings.Join(by[u], ", ")))
	}
	return fmt.Errorf("its sockets are held by processes of more than one user (%s), and only the server's may be "+
		"attached: choose one with -addr, or use -pid and -fd", strings.Join(users, "; "))
}
