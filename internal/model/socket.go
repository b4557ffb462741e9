package model

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// SocketInfo is what the kernel says about a registered socket.
type SocketInfo struct {
	Cookie      uint64         // SO_COOKIE: the data plane's key
	NetnsCookie uint64         // SO_NETNS_COOKIE
	Protocol    int            // unix.IPPROTO_UDP
	Local       netip.AddrPort // getsockname
}

// InspectSocket reads a socket's identity. Asking for SO_COOKIE also makes
// the kernel assign the cookie, which it otherwise does lazily: the data
// plane reads it from the socket and would see 0.
func InspectSocket(fd int) (SocketInfo, error) {
	var info SocketInfo
	var err error
	if info.Cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE); err != nil {
		return info, fmt.Errorf("reading SO_COOKIE: %w", err)
	}
	if info.NetnsCookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE); err != nil {
		return info, fmt.Errorf("reading SO_NETNS_COOKIE: %w", err)
	}
	if info.Protocol, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil {
		return info, fmt.Errorf("reading SO_PROTOCOL: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return info, fmt.Errorf("reading the local address: %w", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		info.Local = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		info.Local = netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	default:
		return info, fmt.Errorf("socket is not IPv4 or IPv6")
	}
	return info, nil
}
