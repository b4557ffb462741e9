package client

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// AnnounceAccepted announces conn, a connection just accepted from an
// attached TCP listener, before the first receive on it: requests that
// arrived before accept() can then be answered by the kernel, where
// otherwise the first receive takes them and the connection stays the
// application's (docs/tcp.md, "Requests that arrive before accept()").
// Go's net package needs none of this: its Accept sets TCP_NODELAY, which
// does the same. It is for connections accepted without the peer's
// address and with no other call before the first receive
// (accept(fd, NULL, NULL) and read), or handed over from such code. It
// needs no client: the kernel handles it. It does nothing on a connection
// that is not Santa's; without Santa's data plane the kernel refuses it
// with an error for which errors.Is(err, syscall.ENOPROTOOPT) holds, which
// an application that runs with or without Santa can ignore.
func AnnounceAccepted(conn syscall.Conn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("announce accepted: %w", err)
	}
	var announceErr error
	// The fd is only valid inside Control.
	if err := raw.Control(func(fd uintptr) { announceErr = AnnounceAcceptedFD(int(fd)) }); err != nil {
		return fmt.Errorf("announce accepted: %w", err)
	}
	return announceErr
}

// AnnounceAcceptedFD announces the connection fd; see AnnounceAccepted.
func AnnounceAcceptedFD(fd int) error {
	if err := unix.SetsockoptInt(fd, model.SockoptLevel, model.SockoptAccepted, 1); err != nil {
		return fmt.Errorf("announce accepted: %w", err)
	}
	return nil
}
