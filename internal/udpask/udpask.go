package scenario

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/procsock"
)

// Capture asks the server (through conn) for every item in items and
// returns its replies with id 0: the bytes Santa's rules answer with. A
// window of requests is in flight, told apart by their ids (item k of
// items has id k mod 2^16, so a late reply to an earlier window is not
// taken for one of this window); lost ones are asked again, up to 5 times.
func Capture(conn net.Conn, request Request, items []int) ([][]byte, error) {
	const window = 64
	replies := make([][]byte, len(items))
	buf := make([]byte, 65536)
	for start := 0; start < len(items); start += window {
		batch := items[start:min(len(items), start+window)]
		for try := 0; ; try++ {
			missing := 0
			for i, item := range batch {
				if replies[start+i] == nil {
					if _, err := conn.Write(request(uint16(start+i), item)); err != nil {
						return nil, err
					}
					missing++
				}
			}
			if missing == 0 {
				break
			}
			if try == 5 {
				return nil, fmt.Errorf("no reply to %d requests after 5 tries", missing)
			}
			conn.SetReadDeadline(time.Now().Add(time.Second))
			for range missing {
				k, err := conn.Read(buf)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				if err != nil {
					return nil, err
				}
				if k < 2 {
					continue
				}
				i := int(binary.BigEndian.Uint16(buf) - uint16(start))
				if i < len(batch) && replies[start+i] == nil {
					r := append([]byte(nil), buf[:k]...)
					r[0], r[1] = 0, 0
					replies[start+i] = r
				}
			}
		}
	}
	return replies, nil
}

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
