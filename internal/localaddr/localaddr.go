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

// read parses a dump of every route.
func read(rib []byte) (Table, Ranges, error) {
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, 0, fmt.Errorf("parsing routes: %w", err)
	}
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
	return t, ranges, nil
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
	table := uint32(rtm.Table)
	var dst []byte
	var oif uint32
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.RTA_TABLE:
			if len(a.Value) == 4 {
				table = binary.NativeEndian.Uint32(a.Value)
			}
		case unix.RTA_DST:
			dst = a.Value
		case unix.RTA_OIF:
			if len(a.Value) == 4 {
				oif = binary.NativeEndian.Uint32(a.Value)
			}
		}
	}
	if table != unix.RT_TABLE_LOCAL {
		return k, 0, false, false
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

// Watcher reads the local table of one network namespace and tells of its
// changes. Its sockets belong to the namespace they were opened in, so it
// serves that namespace from any thread.
type Watcher struct {
	f    *os.File // subscribed to changes
	dump int      // asks for the routes
	seq  uint32
}

// Watch subscribes to route and address changes of the calling thread's
// network namespace.
func Watch() (*Watcher, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("opening netlink socket: %w", err)
	}
	groups := uint32(unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("subscribing to route changes: %w", err)
	}
	dump, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("opening netlink socket: %w", err)
	}
	// Non-blocking and in the runtime's poller: Close wakes a Wait.
	return &Watcher{f: os.NewFile(uintptr(fd), "netlink-route"), dump: dump}, nil
}

// Read dumps the local routing table. It is not safe for concurrent use.
func (w *Watcher) Read() (Table, Ranges, error) {
	w.seq++
	req := make([]byte, unix.SizeofNlMsghdr+unix.SizeofRtMsg)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETROUTE)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], w.seq)
	req[unix.SizeofNlMsghdr] = unix.AF_UNSPEC
	if err := unix.Sendto(w.dump, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, 0, fmt.Errorf("asking for the routes: %w", err)
	}
	var rib []byte
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(w.dump, buf, 0)
		if err != nil {
			return nil, 0, fmt.Errorf("reading the routes: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, 0, fmt.Errorf("parsing routes: %w", err)
		}
		rib = append(rib, buf[:n]...)
		for _, m := range msgs {
			switch {
			case m.Header.Seq != w.seq:
			case m.Header.Type == unix.NLMSG_DONE:
				return read(rib)
			case m.Header.Type == unix.NLMSG_ERROR:
				return nil, 0, fmt.Errorf("reading the routes: netlink error %d", int32(binary.NativeEndian.Uint32(m.Data)))
			}
		}
	}
}

// Wait returns once something changed since the last Wait (or the kernel
// dropped notifications because they came faster than they were read:
// then something may have changed too). It reads every notification that
// is waiting, so that a burst is one change. It returns an error once
// the watcher is closed.
func (w *Watcher) Wait() error {
	buf := make([]byte, 1<<16)
	if _, err := w.f.Read(buf); err != nil && !isOverrun(err) {
		return err
	}
	raw, err := w.f.SyscallConn()
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

func isOverrun(err error) bool { return errors.Is(err, unix.ENOBUFS) }

// Close ends the subscription and wakes a Wait.
func (w *Watcher) Close() error {
	unix.Close(w.dump)
	return w.f.Close()
}
