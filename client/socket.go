package client

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// DefaultSocket is where santad listens unless configured otherwise.
const DefaultSocket = "/run/santa/santa.sock"

// SocketEnv is the environment variable that, when set, names santad's
// socket for santactl and for Dial(""): a santad that listens elsewhere
// (in a network namespace of its own, say) is found without a flag.
const SocketEnv = "SANTA_SOCKET"

// DefaultPath is the socket Dial("") connects to: $SANTA_SOCKET if set,
// else DefaultSocket.
func DefaultPath() string {
	if p := os.Getenv(SocketEnv); p != "" {
		return p
	}
	return DefaultSocket
}

// explainDial adds what to do to an error of connecting to santad's socket
// at path: permission denied is a matter of the socket's group; no socket,
// or nobody listening on it, of santad not running there.
func explainDial(path string, err error) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w; is santad running, with its socket there? ($%s names another socket)", err, SocketEnv)
	}
	if !errors.Is(err, os.ErrPermission) {
		return err
	}
	st, serr := os.Stat(path)
	if serr != nil {
		return fmt.Errorf("%w; a directory on the way to the socket is closed to this user: ask the operator, or use sudo", err)
	}
	group := "?"
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		group = strconv.FormatUint(uint64(sys.Gid), 10)
		if g, err := user.LookupGroupId(group); err == nil {
			group = g.Name
		}
	}
	return fmt.Errorf("%w; the socket is open to group %s (mode %#o): join it (sudo usermod -aG %s $USER, then log in again) or use sudo",
		err, group, st.Mode().Perm(), group)
}
