package procsock

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// TakeFD duplicates file descriptor fd of process pid into this process
// (pidfd_open and pidfd_getfd, Linux 5.6). The kernel asks for ptrace
// access to the process: root, or its owner where ptrace is allowed.
func TakeFD(pid, fd int) (int, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("open process %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	sock, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return -1, fmt.Errorf("take fd %d of process %d: %w", fd, pid, err)
	}
	return sock, nil
}
