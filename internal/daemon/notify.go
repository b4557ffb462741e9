package daemon

import (
	"net"
	"os"
)

// notify tells systemd (Type=notify) about santad's state, e.g. "READY=1".
// Without $NOTIFY_SOCKET it does nothing. (Go maps a leading '@', an
// abstract socket's name, to the NUL byte itself.)
func notify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
