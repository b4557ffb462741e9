package procsock

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Held is where a process holds a socket: its pid and the fd.
type Held struct {
	PID, FD int
}

// Holder finds a process holding the socket with the given inode, and the
// fd it holds it by: /proc/PID/fd/FD links to "socket:[INODE]". Of several
// (a socket inherited across fork), the lowest pid is taken. Processes
// that end or hide their fds meanwhile are skipped.
func Holder(inode uint64) (pid, fd int, err error) {
	held, err := Holders([]uint64{inode})
	if err != nil {
		return 0, 0, err
	}
	h, ok := held[inode]
	if !ok {
		return 0, 0, fmt.Errorf("no process holds socket inode %d", inode)
	}
	return h.PID, h.FD, nil
}

// Holders is Holder for many sockets in one pass over /proc: a listener's
// thousand connections cost one walk, not a thousand. Inodes no process
// holds are missing from the result.
func Holders(inodes []uint64) (map[uint64]Held, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range procs {
		if n, err := strconv.Atoi(p.Name()); err == nil {
			pids = append(pids, n)
		}
	}
	return HoldersAmong(pids, inodes), nil
}

// HoldersAmong is Holders looking only at the processes pids: those of
// one server. Of several holding a socket, the lowest pid is taken.
func HoldersAmong(pids []int, inodes []uint64) map[uint64]Held {
	pids = slices.Sorted(slices.Values(pids))
	wanted := make(map[uint64]bool, len(inodes))
	for _, i := range inodes {
		wanted[i] = true
	}
	held := make(map[uint64]Held, len(inodes))
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, f := range fds {
			target, err := os.Readlink(dir + "/" + f.Name())
			if err != nil || !strings.HasPrefix(target, "socket:[") {
				continue
			}
			inode, err1 := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]"), 10, 64)
			fd, err2 := strconv.Atoi(f.Name())
			if err1 != nil || err2 != nil || !wanted[inode] {
				continue
			}
			if _, seen := held[inode]; !seen {
				held[inode] = Held{PID: pid, FD: fd}
			}
		}
	}
	return held
}
