// Package localaddr reads the host's own addresses from the kernel's local
// routing table (table 255, `ip route show table local`) and follows its
// changes. The data plane answers only packets whose destination is one of
// them, as the stack's input route lookup delivers only those.
//
// The local table is the kernel's own answer, not a copy of it built from
// interface addresses: it holds every address the host accepts packets for
// (RTN_LOCAL) and the IPv4 broadcast addresses (RTN_BROADCAST), in the
// calling thread's network namespace.
package localaddr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kind is what an address is to the host.
type Kind uint8

const (
	Local     Kind = 1 // packets to it are delivered locally
	Broadcast Kind = 2 // an IPv4 broadcast address of one of the host's networks
)

// Key names one address. Ifindex is set only for IPv6 link-local addresses,
// which are scoped to their interface; it is 0 for every other address.
type Key struct {
	Addr    netip.Addr
	Ifindex uint32
}

// Table is the host's addresses and what each is.
type Table map[Key]Kind

// Ranges counts local routes wider than one address (AnyIP, `ip route add
// local 10.0.0.0/24 dev lo`, and 127.0.0.0/8 itself): a table of single
// addresses cannot hold them, so packets to such a range's other addresses
// are not answered in the kernel. Returned beside the table for reports.
type Ranges int

// parse reads the routes of a dump.
func parse(msgs []syscall.NetlinkMessage) (Table, Ranges) {
	t := Table{}
	var ranges Ranges
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWROUTE {
			continue
		}
		k, kind, wide, ok := parseRoute(m)
		switch {
		case !ok:
		case wide:
			ranges++
		default:
			t[k] = kind
		}
	}
	return t, ranges
}

// parseRoute reads one route of the dump. ok is false for a route that is
// not a local or broadcast route of the local table; wide is true for a
// local route of more than one address.
func parseRoute(m syscall.NetlinkMessage) (k Key, kind Kind, wide, ok bool) {
	if len(m.Data) < unix.SizeofRtMsg {
		return k, 0, false, false
	}
	rtm := (*unix.RtMsg)(unsafe.Pointer(&m.Data[0]))
	switch rtm.Type {
	case unix.RTN_LOCAL:
		kind = Local
	case unix.RTN_BROADCAST:
		kind = Broadcast
	default:
		return k, 0, false, false
	}
	attrs, err := syscall.ParseNetlinkRouteAttr(&m)
	if err != nil {
		return k, 0, false, false
	}
	if routeTable(rtm, attrs) != unix.RT_TABLE_LOCAL {
		return k, 0, false, false
	}
	var dst []byte
	var oif uint32
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.RTA_DST:
			dst = a.Value
		case unix.RTA_OIF:
			if len(a.Value) == 4 {
				oif = binary.NativeEndian.Uint32(a.Value)
			}
		}
	}
	addr, ok := netip.AddrFromSlice(dst)
	if !ok {
		return k, 0, false, false
	}
	if int(rtm.Dst_len) != addr.BitLen() {
		return k, 0, true, kind == Local
	}
	k.Addr = addr
	if addr.Is6() && addr.IsLinkLocalUnicast() {
		k.Ifindex = oif
	}
	return k, kind, false, true
}

// routeTable is a route's table: RTA_TABLE, which holds ids past 255, else
// rtm_table.
func routeTable(rtm *unix.RtMsg, attrs []syscall.NetlinkRouteAttr) uint32 {
	for _, a := range attrs {
		if a.Attr.Type == unix.RTA_TABLE && len(a.Value) == 4 {
			return binary.NativeEndian.Uint32(a.Value)
		}
	}
	return uint32(rtm.Table)
}

// Watcher reads the local table of one network namespace and tells of its
// changes. Its sockets belong to the namespace they were opened in, so it
// serves that namespace from any thread. Both are in the runtime's poller:
// Close wakes a Wait or a Read, and a descriptor is never reused while
// either is still at work on it.
type Watcher struct {
	events *os.File // subscribed to route and address changes
	dump   *os.File // asks for the local table
	seq    uint32
}

// Watch subscribes to route and address changes of the calling thread's
// network namespace.
func Watch() (*Watcher, error) {
	groups := uint32(unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR)
	events, err := netlinkSocket(groups)
	if err != nil {
		return nil, fmt.Errorf("subscribing to route changes: %w", err)
	}
	dump, err := netlinkSocket(0)
	if err != nil {
		events.Close()
		return nil, err
	}
	// With strict checking (Linux 4.20) the kernel dumps the local table
	// alone, not every table: a host with a full BGP table would otherwise
	// send all of it at every change. Without it, parse keeps the local
	// table's routes all the same.
	if raw, err := dump.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1)
		})
	}
	return &Watcher{events: events, dump: dump}, nil
}

// netlinkSocket is a non-blocking NETLINK_ROUTE socket bound to groups.
func netlinkSocket(groups uint32) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("opening netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding netlink socket: %w", err)
	}
	return os.NewFile(uintptr(fd), "netlink-route"), nil
}

// Read dumps the local routing table. It is not safe for concurrent use.
// Only the messages of this dump count: those of an earlier one that
// failed half-way may still be queued.
func (w *Watcher) Read() (Table, Ranges, error) {
	w.seq++
	req := make([]byte, unix.SizeofNlMsghdr+unix.SizeofRtMsg)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETROUTE)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], w.seq)
	rtm := req[unix.SizeofNlMsghdr:]
	rtm[0] = unix.AF_UNSPEC
	rtm[4] = unix.RT_TABLE_LOCAL // rtm_table: honoured with strict checking
	if _, err := w.dump.Write(req); err != nil {
		return nil, 0, fmt.Errorf("asking for the routes: %w", err)
	}
	var routes []syscall.NetlinkMessage
	// A dump comes in datagrams of at most 32 KiB.
	buf := make([]byte, 1<<16)
	for {
		n, err := w.dump.Read(buf)
		if err != nil {
			return nil, 0, fmt.Errorf("reading the routes: %w", err)
		}
		// Copied: the messages kept point into it, and buf is read into again.
		msgs, err := syscall.ParseNetlinkMessage(bytes.Clone(buf[:n]))
		if err != nil {
			return nil, 0, fmt.Errorf("parsing routes: %w", err)
		}
		for _, m := range msgs {
			switch {
			case m.Header.Seq != w.seq:
			case m.Header.Type == unix.NLMSG_DONE:
				t, ranges := parse(routes)
				return t, ranges, nil
			case m.Header.Type == unix.NLMSG_ERROR:
				code := int32(0)
				if len(m.Data) >= 4 {
					code = int32(binary.NativeEndian.Uint32(m.Data))
				}
				return nil, 0, fmt.Errorf("reading the routes: %w", syscall.Errno(-code))
			default:
				routes = append(routes, m)
			}
		}
	}
}

// Wait returns once the host's addresses or its local table changed since
// the last Wait (or the kernel dropped notifications because they came
// faster than they were read: then something may have changed too).
// Changes to other tables do not count. It reads every notification that
// is waiting, so that a burst is one change. It returns an error once the
// watcher is closed.
func (w *Watcher) Wait() error {
	buf := make([]byte, 1<<16)
	for changed := false; !changed; {
		n, err := w.events.Read(buf)
		switch {
		case isOverrun(err):
			changed = true
		case err != nil:
			return err
		default:
			changed = anyRelevant(buf[:n])
		}
	}
	raw, err := w.events.SyscallConn()
	if err != nil {
		return err
	}
	// Drain without blocking.
	for {
		var n int
		var rerr error
		if err := raw.Control(func(fd uintptr) {
			n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
		}); err != nil {
			return err
		}
		if rerr == unix.EAGAIN || (rerr == nil && n == 0) {
			return nil
		}
		if rerr != nil && !isOverrun(rerr) {
			return rerr
		}
	}
}

// anyRelevant says whether a datagram of notifications holds a change of
// an address or of a route of the local table.
func anyRelevant(b []byte) bool {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return true // unreadable: read the table again to be sure
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.RTM_NEWADDR, unix.RTM_DELADDR:
			return true
		case unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
			if len(m.Data) < unix.SizeofRtMsg {
				return true
			}
			attrs, err := syscall.ParseNetlinkRouteAttr(&m)
			if err != nil || routeTable((*unix.RtMsg)(unsafe.Pointer(&m.Data[0])), attrs) == unix.RT_TABLE_LOCAL {
				return true
			}
		}
	}
	return false
}

func isOverrun(err error) bool { return errors.Is(err, unix.ENOBUFS) }

// Close ends the subscription and wakes a Wait or a Read.
func (w *Watcher) Close() error {
	w.dump.Close()
	return w.events.Close()
}
