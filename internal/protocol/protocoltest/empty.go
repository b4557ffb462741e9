package protocoltest

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// SendEmpty sends a message of no bytes carrying the descriptors fds on
// the connected SOCK_SEQPACKET socket sock: what no client of the protocol
// should send, and what Sendmsg of Go and x/sys/unix cannot (they send
// one byte instead).
func SendEmpty(sock int, fds ...int) error {
	var msg unix.Msghdr
	if len(fds) > 0 {
		oob := unix.UnixRights(fds...)
		msg.Control = &oob[0]
		msg.SetControllen(len(oob))
	}
	_, _, errno := unix.Syscall(unix.SYS_SENDMSG, uintptr(sock), uintptr(unsafe.Pointer(&msg)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
