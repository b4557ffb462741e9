package daemon

import (
	"fmt"
	"net"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Peer is who is at the other end of a connection, as the kernel recorded
// it at connect time.
type Peer struct {
	UID, GID uint32
	PID      int32
	// Admin may touch every service and has no quota.
	Admin bool
}

// noAdminGroup is adminGroup when no group makes its members admins.
const noAdminGroup = -1

// peerOf reads the credentials the kernel recorded when the client
// connected, and decides from them alone whether it is an admin: uid 0, or
// a member of adminGroup (its gid or one of its supplementary groups), if
// that is not noAdminGroup.
//
// Nothing is read from the client's process as it is now: a process may
// connect unprivileged and gain privileges later at the same pid (exec a
// setuid program), or hand the connection to one that has them; what it
// was at connect time is what it proved. The kernel gives the ids in
// santad's user namespace, so a container's root, mapped to another uid
// here, is not uid 0.
func peerOf(c *net.UnixConn, adminGroup int64) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var groups []uint32
	var credErr, groupsErr error
	err = raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil && adminGroup != noAdminGroup {
			groups, groupsErr = peerGroups(int(fd))
		}
	})
	switch {
	case err != nil:
		return Peer{}, err
	case credErr != nil:
		return Peer{}, fmt.Errorf("reading SO_PEERCRED: %w", credErr)
	case groupsErr != nil:
		return Peer{}, fmt.Errorf("reading SO_PEERGROUPS: %w", groupsErr)
	}
	p := Peer{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}
	p.Admin = p.UID == 0 || (adminGroup != noAdminGroup &&
		(int64(p.GID) == adminGroup || slices.Contains(groups, uint32(adminGroup))))
	return p, nil
}

// peerGroups reads SO_PEERGROUPS: the supplementary groups of the peer as
// they were when it connected. x/sys/unix has no wrapper for it.
func peerGroups(fd int) ([]uint32, error) {
	groups := make([]uint32, 64)
	for {
		size := uint32(len(groups) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&groups[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case errno == unix.ERANGE: // size is now what it takes
			groups = make([]uint32, size/4)
		case errno != 0:
			return nil, errno
		default:
			return groups[:size/4], nil
		}
	}
}
