package udpask

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

// WriteFullChecksum sends b over conn (connected) as one datagram whose
// UDP checksum the kernel computes in full, even where the device would
// leave it partial to offload: loopback's TX checksum offload cannot be
// turned off (ethtool says "fixed"), so this is how a local client sends
// full checksums there. The datagram is corked: the first append to it,
// under MSG_MORE, is not offloaded (__ip_append_data leaves it
// CHECKSUM_NONE), so udp_send_skb sums it in software when the empty send
// after it pushes it out.
func WriteFullChecksum(conn *net.UDPConn, b []byte) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Write(func(fd uintptr) bool {
		if serr = unix.Send(int(fd), b, unix.MSG_MORE); serr == nil {
			serr = unix.Send(int(fd), nil, 0)
		}
		return serr != unix.EAGAIN
	})
	return errors.Join(err, serr)
}
