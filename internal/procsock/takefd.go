package procsock

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// TakeFD duplicates file descriptor fd of process pid into this process
// (pidfd_open and pidfd_getfd, Linux 5.6). The kernel asks for ptrace
// access to the process: root, or its owner where ptrace is allowed.
func TakeFD(pid, fd int) (int, error) {
	return take(pid, fd, nil)
}

// TakeSocket duplicates the socket with the given inode, which process
// h.PID held by fd h.FD when /proc was read, into this process (as
// TakeFD), if that process still holds it by that fd and check(h.PID)
// (nil: none) accepts the process. Since /proc was read, the process may
// have closed the fd and reused its number, or ended and had its pid
// given to another process: check is to look at pid again (whom it runs
// as, its cgroup's processes) and refuse a process not to take from, and
// TakeSocket makes sure that the process check saw under pid is the one
// it takes from (take). The caller closes the fd.
func TakeSocket(h Held, inode uint64, check func(pid int) error) (int, error) {
	fd, err := take(h.PID, h.FD, check)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Ino != inode {
		unix.Close(fd)
		return -1, fmt.Errorf("fd %d of process %d is no longer socket %d", h.FD, h.PID, inode)
	}
	return fd, nil
}

// take duplicates fd of process pid, if check (nil: none) accepts pid.
// The process is opened (pidfd_open) before check looks at pid (in
// /proc/PID, a cgroup.procs), and the fd taken through that pidfd after:
// a pid is freed only when its process is reaped, after it has released
// its files, and pidfd_getfd fails for a process that has released them
// (a zombie) or been reaped. So if pidfd_getfd succeeds, the pidfd's
// process held the pid from pidfd_open on, and what check saw of pid was
// this process, not one that got the pid after it ended.
// (pidfd_send_signal(pidfd, 0) would prove the same, but needs the right
// to signal the process, CAP_KILL, which the agents' units do not give,
// and its EPERM would not tell a live process from a call the units'
// seccomp filter refused.)
func take(pid, fd int, check func(pid int) error) (int, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("open process %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	if check != nil {
		if err := check(pid); err != nil {
			return -1, err
		}
	}
	sock, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return -1, fmt.Errorf("take fd %d of process %d: %w", fd, pid, err)
	}
	return sock, nil
}
