package procsock

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Listening TCP sockets through sock_diag (NETLINK_SOCK_DIAG), not
// /proc/net/tcp{,6}: reading those walks every bucket of the kernel's
// established-connection table, milliseconds per read on a machine with
// much memory however few sockets there are, and an agent scans each
// second. A dump asking for the LISTEN state only walks the listening
// table (inet_diag_dump_icsk).

// inetDiagSockID is struct inet_diag_sockid (linux/inet_diag.h).
type inetDiagSockID struct {
	Sport, Dport [2]byte // network order
	Src, Dst     [16]byte
	If           uint32
	Cookie       [2]uint32
}

// inetDiagReqV2 is struct inet_diag_req_v2.
type inetDiagReqV2 struct {
	Family, Protocol, Ext, Pad uint8
	States                     uint32
	ID                         inetDiagSockID
}

// inetDiagMsg is struct inet_diag_msg.
type inetDiagMsg struct {
	Family, State, Timer, Retrans uint8
	ID                            inetDiagSockID
	Expires, RQueue, WQueue, UID  uint32
	Inode                         uint32
}

// readListeningTCP is the listening TCP sockets of the calling thread's
// network namespace, IPv4 and IPv6.
func readListeningTCP() ([]Socket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	var all []Socket
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		sockets, err := dumpListening(fd, family)
		if err != nil {
			return nil, fmt.Errorf("listing listening TCP sockets (family %d): %w", family, err)
		}
		all = append(all, sockets...)
	}
	return all, nil
}

// dumpListening asks for one family's listening TCP sockets and reads the
// dump to its end.
func dumpListening(fd int, family uint8) ([]Socket, error) {
	req := inetDiagReqV2{Family: family, Protocol: unix.IPPROTO_TCP, States: 1 << TCPListen}
	hdr := unix.NlMsghdr{
		Len:   uint32(unix.SizeofNlMsghdr + unsafe.Sizeof(req)),
		Type:  unix.SOCK_DIAG_BY_FAMILY,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_DUMP,
		Seq:   1,
	}
	msg := append(unsafe.Slice((*byte)(unsafe.Pointer(&hdr)), unix.SizeofNlMsghdr),
		unsafe.Slice((*byte)(unsafe.Pointer(&req)), unsafe.Sizeof(req))...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var sockets []Socket
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return sockets, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
						return nil, unix.Errno(-errno)
					}
				}
				return nil, fmt.Errorf("netlink error %x", m.Data)
			}
			s, err := parseDiagMsg(m.Data)
			if err != nil {
				return nil, err
			}
			sockets = append(sockets, s)
		}
	}
}

// parseDiagMsg parses an inet_diag_msg of a listening socket.
func parseDiagMsg(b []byte) (Socket, error) {
	var m inetDiagMsg
	if len(b) < int(unsafe.Sizeof(m)) {
		return Socket{}, fmt.Errorf("a %d-byte inet_diag_msg, want %d", len(b), unsafe.Sizeof(m))
	}
	m = *(*inetDiagMsg)(unsafe.Pointer(&b[0]))
	var addr netip.Addr
	switch m.Family {
	case unix.AF_INET:
		addr = netip.AddrFrom4([4]byte(m.ID.Src[:4]))
	case unix.AF_INET6:
		addr = netip.AddrFrom16(m.ID.Src)
	default:
		return Socket{}, fmt.Errorf("inet_diag_msg of family %d", m.Family)
	}
	port := binary.BigEndian.Uint16(m.ID.Sport[:])
	return Socket{Local: netip.AddrPortFrom(addr, port), State: int(m.State), UID: m.UID, Inode: uint64(m.Inode)}, nil
}
