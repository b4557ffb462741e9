package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listen is a fake systemd: a datagram socket $NOTIFY_SOCKET names.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", name)
	return c
}

func receive(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotify(t *testing.T) {
	for _, name := range []string{
		filepath.Join(t.TempDir(), "notify"),
		"@santa-sdnotify-test-" + strconv.Itoa(os.Getpid()), // abstract, as systemd >= 254 uses
	} {
		c := listen(t, name)
		for _, state := range []string{Ready, Reloading + "\nMONOTONIC_USEC=1", Watchdog, Stopping} {
			if err := Notify(state); err != nil {
				t.Fatalf("%s: Notify(%q): %v", name, state, err)
			}
			if got := receive(t, c); got != state {
				t.Errorf("%s: systemd got %q, want %q", name, got, state)
			}
		}
	}
}

func TestNotifyWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := Notify(Ready); err != nil {
		t.Errorf("Notify without NOTIFY_SOCKET: %v, want nothing done", err)
	}
}

func TestNotifyErrors(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "relative/notify")
	if err := Notify(Ready); err == nil {
		t.Error("a relative NOTIFY_SOCKET was accepted")
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "nobody-listens"))
	if err := Notify(Ready); err == nil {
		t.Error("a socket nobody listens on was accepted")
	}
}

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	tests := []struct {
		usec, pid string
		want      time.Duration
		err       bool
	}{
		{"", "", 0, false},
		{"20000000", "", 10 * time.Second, false},
		{"20000000", self, 10 * time.Second, false},
		{"20000000", "1", 0, false}, // another process's watchdog
		{"0", "", 0, true},
		{"-5", "", 0, true},
		{"20s", "", 0, true},
	}
	for _, tt := range tests {
		t.Setenv("WATCHDOG_USEC", tt.usec)
		t.Setenv("WATCHDOG_PID", tt.pid)
		got, err := WatchdogInterval()
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %v, %v; want %v, error %v", tt.usec, tt.pid, got, err, tt.want, tt.err)
		}
	}
}
