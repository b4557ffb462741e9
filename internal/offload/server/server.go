// Package server finds the sockets a server answers on and follows them:
// the server is the processes of a cgroup (a systemd unit's, or a given
// process's) or, without one, the processes of one user that hold sockets
// bound to the port;
// its sockets are the unconnected UDP sockets bound to its UDP port (a DNS
// server's, memcached's -U) and, if asked, the TCP listeners on its TCP
// port (memcached's -p), in one network namespace (santad's). Outgoing
// sockets, bound to other ports, are never its.
package server

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/procsock"
)

// Target names the server. At most one of PID, Unit and Cgroup is set;
// with none, the sockets bound to Port are the server's if one user holds
// them all (Finder.Scan).
type Target struct {
	// PID is a process of the server: the server is the processes of its
	// cgroup v2 (so a restart under a new pid is followed), or, when that
	// is the root cgroup, every process running as the user PID runs as.
	PID int
	// Unit is a systemd unit ("named" is named.service): the server is the
	// processes of the cgroup system.slice/UNIT.
	Unit string
	// Cgroup is a cgroup v2 path under the hierarchy's root
	// ("system.slice/knot.service"): the server is its processes.
	Cgroup string
	// Port is the UDP port.
	Port uint16
	// TCPPort, if not 0, is the TCP port whose listeners are the
	// server's too.
	TCPPort uint16
	// Netns is the network namespace the sockets are in ("": this
	// process's), santad's. Reading another's tables needs CAP_SYS_ADMIN.
	Netns string
}

// Socket is a socket of the server: bound to the UDP port, or listening
// on the TCP port.
type Socket struct {
	TCP    bool // a TCP listener
	Inode  uint64
	Local  netip.AddrPort
	Holder procsock.Held // a process of the server holding it, and its fd there
}

// Scanner finds a server's sockets (*Finder; tests give fakes).
type Scanner interface {
	Scan(known map[uint64]bool) (live map[uint64]bool, fresh []Socket, err error)
}

// Finder finds a server's sockets (Scan) and takes them (Take), from one
// goroutine at a time.
type Finder struct {
	t      Target
	cgroup string // absolute cgroup directory; "" for every process
	// Without a cgroup, the server is one user's processes (oneUser):
	// user is whom PID ran as when the finder was made, if a PID was
	// given; owned is the sockets the last scan found the server's, by
	// inode, with their holders.
	user  procsock.User
	owned map[uint64]holder
}

// holder is a process holding a socket, and whom it runs as.
type holder struct {
	pid  int
	user procsock.User
}

// udpUnconnected is the state an unconnected UDP socket shows in
// /proc/net/udp (TCP_CLOSE); a connected one shows 1 (ESTABLISHED).
const udpUnconnected = 7

// NewFinder resolves t's cgroup.
func NewFinder(t Target) (*Finder, error) {
	set := 0
	for _, b := range []bool{t.PID != 0, t.Unit != "", t.Cgroup != ""} {
		if b {
			set++
		}
	}
	switch {
	case set > 1:
		return nil, errors.New("give at most one of a pid, a unit and a cgroup")
	case t.Port == 0:
		return nil, errors.New("the UDP port is 0")
	case t.PID < 0:
		return nil, fmt.Errorf("pid %d", t.PID)
	case strings.Contains(t.Unit, "/") || t.Unit == "." || t.Unit == "..":
		// "../user.slice" would name every user's session.
		return nil, fmt.Errorf("unit %q is not a unit's name", t.Unit)
	}
	f := &Finder{t: t}
	var rel string
	switch {
	case t.PID != 0:
		var err error
		if rel, err = cgroupOf(t.PID); err != nil {
			return nil, err
		}
	case t.Unit != "":
		rel = "system.slice/" + unitName(t.Unit)
	case t.Cgroup != "":
		rel = t.Cgroup
	}
	if rel != "" {
		root, err := cgroup2Root()
		if err != nil {
			return nil, err
		}
		f.cgroup = cgroupDir(root, rel)
	}
	if f.cgroup == "" && t.PID != 0 {
		var err error
		if f.user, err = procsock.UserOf(t.PID); err != nil {
			return nil, fmt.Errorf("process %d: %w", t.PID, err)
		}
	}
	return f, nil
}

// Describe says what the finder takes to be the server.
func (f *Finder) Describe() string {
	where := f.where()
	switch {
	case f.cgroup == "" && f.t.PID != 0:
		return fmt.Sprintf("the processes running as %v (process %d's user) bound to %s", f.user, f.t.PID, where)
	case f.cgroup == "":
		return "the processes of one user bound to " + where
	}
	return fmt.Sprintf("the processes of cgroup %s bound to %s", f.cgroup, where)
}

// where is the server's ports, and its network namespace.
func (f *Finder) where() string {
	where := fmt.Sprintf("UDP port %d", f.t.Port)
	if f.t.TCPPort != 0 {
		where += fmt.Sprintf(" or listening on TCP port %d", f.t.TCPPort)
	}
	if f.t.Netns != "" {
		where += " in network namespace " + f.t.Netns
	}
	return where
}

// Scan reads the sockets bound to the ports. Of those in known, it
// reports which are still bound (live); the others it reports with a
// process of the server that holds them (fresh), leaving out those no
// process of the server holds. Only fresh sockets cost a walk over the
// processes' fds. Without a cgroup it fails if it cannot tell the
// server's user (oneUser).
func (f *Finder) Scan(known map[uint64]bool) (live map[uint64]bool, fresh []Socket, err error) {
	bound, err := procsock.BoundUDP(f.t.Netns, f.t.Port, netip.Addr{})
	if err != nil {
		return nil, nil, err
	}
	var listening []procsock.Socket
	if f.t.TCPPort != 0 {
		if listening, err = procsock.ListeningTCP(f.t.Netns, f.t.TCPPort, netip.Addr{}); err != nil {
			return nil, nil, err
		}
	}
	live = map[uint64]bool{}
	found := map[uint64]Socket{}
	var unknown []uint64
	isBound := map[uint64]bool{} // the server's sockets could be: by inode
	note := func(s procsock.Socket, tcp bool) {
		if tcp || s.State == udpUnconnected {
			isBound[s.Inode] = true
		}
		switch {
		case !tcp && s.State != udpUnconnected:
		case known[s.Inode]:
			live[s.Inode] = true
		default:
			unknown = append(unknown, s.Inode)
			found[s.Inode] = Socket{TCP: tcp, Inode: s.Inode, Local: s.Local}
		}
	}
	for _, s := range bound {
		note(s, false)
	}
	for _, s := range listening {
		note(s, true)
	}
	if len(unknown) == 0 {
		return live, nil, nil
	}
	var held map[uint64]procsock.Held
	if f.cgroup == "" {
		if held, err = procsock.Holders(unknown); err == nil {
			err = f.oneUser(isBound, held)
		}
	} else {
		var pids []int
		if pids, err = cgroupProcs(f.cgroup); err == nil {
			held = procsock.HoldersAmong(pids, unknown)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	for _, inode := range slices.Sorted(maps.Keys(held)) {
		s := found[inode]
		s.Holder = held[inode]
		fresh = append(fresh, s)
	}
	return live, fresh, nil
}

// oneUser keeps the server's sockets to one user's when no cgroup tells
// the server's processes: any local user may bind the port beside the
// server (at the server's own address with SO_REUSEADDR, which BIND and
// memcached set, or on loopback), and a socket of theirs taken for the
// server's would receive the agent's asks to the server's address, whose
// answers the kernel would then give every client. The server's user is
// PID's, with a PID; with the port alone, it is the user of the sockets
// judged the server's before that are still bound (bound: by inode),
// known to the agent or not (after a broken connection to santad it
// knows none, and must take its services up again, rules and all, for
// them not to go unfollowed). A socket of another user is not the
// server's. Without either (the agent's first scan, or every socket
// judged before closed: a restart), the fresh sockets (held) must all be
// one user's, or the scan fails naming the users: the agent cannot tell
// which is the server. It drops from held the sockets that are not the
// server's. A socket held by several processes is judged by the one
// Holders names (the lowest pid).
func (f *Finder) oneUser(bound map[uint64]bool, held map[uint64]procsock.Held) error {
	now := map[uint64]holder{}
	for inode, h := range f.owned {
		if bound[inode] {
			now[inode] = h
		}
	}
	user, known := f.user, f.t.PID != 0
	for _, h := range now {
		if !known {
			user, known = h.user, true
		}
	}
	for inode, h := range held {
		if _, ok := now[inode]; ok {
			continue // judged before
		}
		u, err := procsock.UserOf(h.PID)
		if err != nil || known && u != user {
			delete(held, inode) // the process ended meanwhile, or it is another user's
			continue
		}
		now[inode] = holder{h.PID, u}
	}
	pids := map[procsock.User][]int{}
	for _, h := range now {
		pids[h.user] = append(pids[h.user], h.pid)
	}
	if len(pids) > 1 {
		var users []string
		for _, u := range slices.SortedFunc(maps.Keys(pids), func(a, b procsock.User) int { return slices.Compare(a[:], b[:]) }) {
			of := slices.Compact(slices.Sorted(slices.Values(pids[u])))
			users = append(users, fmt.Sprintf("%v (pid %s)", u, strings.Trim(fmt.Sprint(of), "[]")))
		}
		return fmt.Errorf("the sockets bound to %s are held by processes of more than one user: %s. Without a cgroup "+
			"naming the server they must all be one user's, lest another user's socket beside the server's receive "+
			"the agent's asks and have its answers served to every client: name the server with -pid, -unit or -cgroup",
			f.where(), strings.Join(users, "; "))
	}
	f.owned = now
	return nil
}

// Take duplicates socket s, found by the last Scan, into this process
// (pidfd_getfd: root, or the server's user where ptrace is allowed;
// docs/offload-dns.md) if its holder is still a process of the server
// and still holds it by that fd. Since the scan, the holder may have
// ended and its pid gone to another user's process holding a socket on
// the port, or closed the fd and reused the number: with the process
// opened, Take checks again that it is in the cgroup, or without one
// that it runs as the server's user (isServer), and procsock.TakeSocket
// that the check read the process taken from and that the fd is s's.
// The caller closes the fd.
func (f *Finder) Take(s Socket) (int, error) {
	return procsock.TakeSocket(s.Holder, s.Inode, func(pid int) error { return f.isServer(pid, s.Inode) })
}

// isServer checks that process pid is one of the server's, as a holder
// of socket inode: listed in the cgroup's processes as Scan lists them
// (cgroupProcs), or without a cgroup, running as the user whose socket
// oneUser judged inode. Not by /proc/PID/cgroup: it shows the path from
// the reader's cgroup namespace, which an agent in a container has its
// own of (deploy/kubernetes), making other cgroups' paths "/../..".
func (f *Finder) isServer(pid int, inode uint64) error {
	if f.cgroup == "" {
		h, ok := f.owned[inode]
		if !ok {
			return fmt.Errorf("socket %d is not one the last scan judged the server's", inode)
		}
		u, err := procsock.UserOf(pid)
		if err != nil {
			return fmt.Errorf("process %d: %w", pid, err)
		}
		if u != h.user {
			return fmt.Errorf("process %d runs as %v, not as the server (%v)", pid, u, h.user)
		}
		return nil
	}
	pids, err := cgroupProcs(f.cgroup)
	if err != nil {
		return err
	}
	if !slices.Contains(pids, pid) {
		return fmt.Errorf("process %d is not the server's: not in cgroup %s", pid, f.cgroup)
	}
	return nil
}

// AskAddr is where to ask a server bound to local: its own address, or
// loopback for a wildcard.
func AskAddr(local netip.AddrPort) netip.AddrPort {
	addr := local.Addr().Unmap()
	switch {
	case addr == netip.IPv4Unspecified():
		addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case addr == netip.IPv6Unspecified():
		addr = netip.IPv6Loopback()
	}
	return netip.AddrPortFrom(addr, local.Port())
}

// UnprivilegedPortStart is net.ipv4.ip_unprivileged_port_start of the
// network namespace at nsPath (this process's for ""): any process may
// bind a port from there up, over IPv4 and IPv6; a lower one needs
// CAP_NET_BIND_SERVICE.
func UnprivilegedPortStart(nsPath string) (int, error) {
	var start int
	err := netns.Run(nsPath, func() error {
		// /proc/sys/net is the calling thread's network namespace's.
		b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
		if err != nil {
			return err
		}
		start, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	})
	return start, err
}
