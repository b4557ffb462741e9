package daemon

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// notSocket says what the descriptor fd is if it is not a socket, "" if it
// is one. An O_PATH descriptor is not, even of a socket's inode: it opens
// no socket, and getsockopt on it fails with EBADF, not ENOTSOCK.
func notSocket(fd int) string {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return fmt.Sprintf("reading its flags: %v", err)
	}
	if flags&unix.O_PATH != 0 {
		return "it is an O_PATH descriptor, which opens no socket"
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Sprintf("fstat: %v", err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		return ""
	case unix.S_IFREG:
		return "it is a regular file"
	case unix.S_IFDIR:
		return "it is a directory"
	case unix.S_IFIFO:
		return "it is a pipe or FIFO"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "it is a device"
	}
	return "it is an anonymous inode (eventfd, epoll, BPF object, ...)"
}
