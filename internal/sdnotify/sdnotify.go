// Package sdnotify speaks systemd's notify protocol (sd_notify(3)): one
// datagram of "KEY=VALUE" lines to the socket $NOTIFY_SOCKET names, which
// systemd sets for a Type=notify service. Without it every call is a
// no-op, so a daemon started by hand behaves the same.
package sdnotify

import (
	"errors"
	"net"
	"os"
	"strconv"
	"time"
)

// The states santad sends.
const (
	Ready     = "READY=1"
	Reloading = "RELOADING=1"
	Stopping  = "STOPPING=1"
	Watchdog  = "WATCHDOG=1"
)

// Notify sends state, one or more "KEY=VALUE" lines, to $NOTIFY_SOCKET.
// A leading '@' names an abstract socket; Go's net package maps it to the
// NUL byte itself.
func Notify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] != '/' && path[0] != '@' {
		return errors.New("NOTIFY_SOCKET is neither an absolute path nor an abstract socket: " + path)
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}

// WatchdogInterval is how often to send Watchdog: half of $WATCHDOG_USEC,
// as sd_watchdog_enabled(3) advises, or 0 if systemd expects no
// keep-alives from this process ($WATCHDOG_PID names another one).
func WatchdogInterval() (time.Duration, error) {
	usec := os.Getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0, nil
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0, nil
	}
	n, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || n == 0 {
		return 0, errors.New("WATCHDOG_USEC is not a positive number of microseconds: " + usec)
	}
	return time.Duration(n) * time.Microsecond / 2, nil
}
