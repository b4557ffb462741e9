package daemon

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// capNetAdmin is CAP_NET_ADMIN's bit in /proc/PID/status's CapEff.
const capNetAdmin = 12

// Peer is who is at the other end of a connection, as the kernel recorded
// it at connect time.
type Peer struct {
	UID, GID uint32
	PID      int32
	// Admin may touch every service: uid 0, or CAP_NET_ADMIN in santad's
	// user namespace.
	Admin bool
}

// peerOf reads SO_PEERCRED and decides whether the peer is an admin.
func peerOf(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	pidfd := -1
	var credErr error
	err = raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		// The pidfd pins the peer's identity: a pid read later could be
		// another process's by then (Linux 6.5; without it, the pid alone).
		if n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			pidfd = n
		}
	})
	if err == nil {
		err = credErr
	}
	if err != nil {
		return Peer{}, fmt.Errorf("reading SO_PEERCRED: %w", err)
	}
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	p := Peer{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}
	p.Admin = p.UID == 0 || hasNetAdmin(p.PID, pidfd)
	return p, nil
}

// hasNetAdmin reports whether process pid has CAP_NET_ADMIN in effect in
// santad's user namespace: a capability held in a user namespace of its
// own (a container's root) grants nothing here.
func hasNetAdmin(pid int32, pidfd int) bool {
	if pid <= 0 || !sameUserNS(pid) {
		return false
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	var capEff uint64
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			capEff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			found = err == nil
			break
		}
	}
	// What was read is the peer's only if the peer still lives: then its
	// pid cannot have been reused.
	if pidfd >= 0 && unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil {
		return false
	}
	return found && capEff&(1<<capNetAdmin) != 0
}

func sameUserNS(pid int32) bool {
	var mine, theirs unix.Stat_t
	if unix.Stat("/proc/self/ns/user", &mine) != nil ||
		unix.Stat(fmt.Sprintf("/proc/%d/ns/user", pid), &theirs) != nil {
		return false
	}
	return mine.Dev == theirs.Dev && mine.Ino == theirs.Ino
}
