package daemon

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/procsock"
)

// Adopter puts one connection, by a descriptor of it, under the rules of
// the TCP listener svc: the data path's AdoptConnection. It refuses a
// connection that listener did not accept with model.ErrNotListener.
type Adopter interface {
	AdoptConnection(svc model.ServiceID, fd int) error
}

// AdoptConnections adopts (Adopter) every established connection that the
// TCP listener svc, whose socket is listener, accepted before it was
// registered: found in /proc/net/tcp of the network namespace at nsPath
// (this thread's for "") by the listener's port, and taken from the
// process holding it (pidfd_getfd, so root). A connection that is not
// idle, or that closes meanwhile, is skipped with its reason.
//
// The port alone does not make a connection the listener's: with
// SO_REUSEADDR, another uid's outgoing connection can have the same local
// port. So for a client that is not an admin, only connections of its own
// uid (the owner /proc/net/tcp shows: whoever accepted, or created, the
// socket) are taken, onlyUID; model.AnyUID takes every one.
func AdoptConnections(dp Adopter, svc model.ServiceID, listener model.SocketInfo, nsPath string, onlyUID int64) (model.Adopted, error) {
	var got model.Adopted
	if listener.Protocol != unix.IPPROTO_TCP {
		return got, fmt.Errorf("service %d is not a TCP listener: %w", svc, model.ErrNotListener)
	}
	all, err := procsock.EstablishedTCP(nsPath, listener.Local.Port())
	if err != nil {
		return got, fmt.Errorf("listing connections: %w", err)
	}
	var conns []procsock.Socket
	for _, c := range all {
		if onlyUID != model.AnyUID && int64(c.UID) != onlyUID {
			got.Skipped = append(got.Skipped, fmt.Errorf("connection on %s: owned by uid %d, not by uid %d", c.Local, c.UID, onlyUID))
			continue
		}
		conns = append(conns, c)
	}
	if len(conns) == 0 {
		return got, nil // no need to read every process's descriptors
	}
	inodes := make([]uint64, len(conns))
	for i, c := range conns {
		inodes[i] = c.Inode
	}
	held, err := procsock.Holders(inodes)
	if err != nil {
		return got, fmt.Errorf("finding the connections' holders: %w", err)
	}
	for _, c := range conns {
		h, ok := held[c.Inode]
		if !ok {
			got.Skipped = append(got.Skipped, fmt.Errorf("connection on %s: no process holds it (closed meanwhile, or not accepted yet)", c.Local))
			continue
		}
		err := adoptHeld(dp, svc, h, c.Inode)
		switch {
		case err == nil:
			got.Adopted++
		case errors.Is(err, model.ErrNotListener):
			// Another listener's connection on the same port (another address).
		default:
			got.Skipped = append(got.Skipped, fmt.Errorf("connection on %s (pid %d, fd %d): %w", c.Local, h.PID, h.FD, err))
		}
	}
	return got, nil
}

// adoptHeld takes the descriptor h names and adopts it, if it is still the
// socket inode that was checked: the process may have closed it and opened
// another under the same number meanwhile.
func adoptHeld(dp Adopter, svc model.ServiceID, h procsock.Held, inode uint64) error {
	fd, err := procsock.TakeFD(h.PID, h.FD)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Ino != inode {
		return fmt.Errorf("the descriptor is another socket now (inode %d, not %d)", st.Ino, inode)
	}
	return dp.AdoptConnection(svc, fd)
}
