package procsock

import (
	"fmt"
	"os"
	"slices"
	"strconv"
)

// Holder finds a process holding the socket with the given inode, and the
// fd it holds it by: /proc/PID/fd/FD links to "socket:[INODE]". Of several
// (a socket inherited across fork), the lowest pid is taken. Processes
// that end or hide their fds meanwhile are skipped.
func Holder(inode uint64) (pid, fd int, err error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	var pids []int
	for _, p := range procs {
		if n, err := strconv.Atoi(p.Name()); err == nil {
			pids = append(pids, n)
		}
	}
	slices.Sort(pids)
	link := fmt.Sprintf("socket:[%d]", inode)
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, f := range fds {
			if target, err := os.Readlink(dir + "/" + f.Name()); err == nil && target == link {
				fd, err := strconv.Atoi(f.Name())
				if err == nil {
					return pid, fd, nil
				}
			}
		}
	}
	return 0, 0, fmt.Errorf("no process holds socket inode %d", inode)
}
