package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// defaultGroup owns the socket if it exists and no group is configured.
const defaultGroup = "santa"

// listen creates santad's SOCK_SEQPACKET socket with its mode and group.
func listen(cfg Config) (*net.UnixListener, error) {
	mode, err := cfg.socketMode()
	if err != nil {
		return nil, err
	}
	gid, err := socketGroup(cfg.SocketGroup)
	if err != nil {
		return nil, err
	}
	// Nobody but root and santad may write the directory (checkSocketDir),
	// so the socket santad creates there stays the file its group and
	// mode are set on, by name, below.
	if err := checkSocketDir(filepath.Dir(cfg.Socket)); err != nil {
		return nil, err
	}
	if c, err := net.Dial("unixpacket", cfg.Socket); err == nil {
		c.Close()
		return nil, fmt.Errorf("another santad is serving %s", cfg.Socket)
	}
	// A socket file left by a santad that was killed.
	if err := os.Remove(cfg.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket: %w", err)
	}
	// Nobody else may connect before the mode and group are set.
	old := unix.Umask(0o177)
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: cfg.Socket, Net: "unixpacket"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	// Neither follows a symbolic link, should one be there after all.
	if err := os.Lchown(cfg.Socket, -1, gid); err != nil {
		l.Close()
		return nil, fmt.Errorf("setting the socket's group: %w", err)
	}
	if err := chmodSocket(cfg.Socket, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("setting the socket's mode: %w", err)
	}
	return l, nil
}

// chmodSocket sets the mode of the socket at path, not following a
// symbolic link: a Unix socket's descriptor has no fchmod, so by name,
// with fchmodat2's AT_SYMLINK_NOFOLLOW (Linux 6.6). Before it, chmod, on
// what lstat found a socket: the checked directory (checkSocketDir) keeps
// anybody else from swapping it in between.
func chmodSocket(path string, mode os.FileMode) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if st.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s is no longer the socket santad created, but %v", path, st.Mode())
	}
	err = unix.Fchmodat(unix.AT_FDCWD, path, uint32(mode.Perm()), unix.AT_SYMLINK_NOFOLLOW)
	// EPERM on santad's own new socket: a seccomp filter that does not
	// know fchmodat2 (santad.service's, under a systemd before 255, which
	// refuses unknown calls with EPERM).
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return os.Chmod(path, mode)
	}
	if err != nil {
		return &os.PathError{Op: "chmod", Path: path, Err: err}
	}
	return nil
}

// socketGroup is the gid of a group name or number; for "", that of
// defaultGroup if it exists, else -1 (santad's own).
func socketGroup(name string) (int, error) {
	if name == "" {
		if gid, err := groupID(defaultGroup); err == nil {
			return gid, nil
		}
		return -1, nil
	}
	gid, err := groupID(name)
	if err != nil {
		return 0, fmt.Errorf("socket group: %w", err)
	}
	return gid, nil
}

// groupID is the gid of a group number or name.
func groupID(name string) (int, error) {
	if gid, err := strconv.ParseUint(name, 10, 32); err == nil {
		return int(gid), nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}

// Accept serves every connection on l until l is closed.
func (s *Server) Accept(l *net.UnixListener) {
	for {
		c, err := l.AcceptUnix()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, say: wait rather than spin.
			s.log.Error("accepting a connection", "err", err)
			s.counters.failed(errAccept)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		peer, err := peerOf(c, s.adminGroup.Load())
		if err != nil {
			s.log.Error("reading a client's credentials", "err", err)
			s.counters.failed(errPeer)
			c.Close()
			continue
		}
		go s.Serve(c, peer)
	}
}
