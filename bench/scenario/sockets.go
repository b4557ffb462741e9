package scenario

import (
	"fmt"
	"net/netip"

	"github.com/santa-offload/santa/internal/procsock"
	"golang.org/x/sys/unix"
)

// sockets returns copies (pidfd_getfd) of every UDP socket bound to
// addr:port in the network namespace at nsPath, from whichever process
// holds it: the application's own sockets, which Santa's rules attach to.
func sockets(nsPath string, addr netip.Addr, port uint16) ([]int, error) {
	bound, err := procsock.BoundUDP(nsPath, port, addr)
	if err != nil {
		return nil, err
	}
	if len(bound) == 0 {
		return nil, fmt.Errorf("no UDP socket bound to %v", netip.AddrPortFrom(addr, port))
	}
	var fds []int
	for _, s := range bound {
		pid, n, err := procsock.Holder(s.Inode)
		var fd int
		if err == nil {
			fd, err = procsock.TakeFD(pid, n)
		}
		if err != nil {
			closeAll(fds)
			return nil, err
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
