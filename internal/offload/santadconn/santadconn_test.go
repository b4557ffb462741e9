package santadconn

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/offload/server"
	"github.com/santa-offload/santa/internal/protocol"
)

type conn struct{ closed bool }

func (c *conn) Close() error { c.closed = true; return nil }

// A refusal keeps the connection; any other error drops it, and the next
// Get dials again. A run of failed dials is logged once.
func TestDialAndDrop(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	fail := true
	var dialled []*conn
	d := NewDialer(func() (*conn, error) {
		if fail {
			return nil, errors.New("no santad")
		}
		c := &conn{}
		dialled = append(dialled, c)
		return c, nil
	})
	var sd *conn
	for range 3 {
		if _, err := d.Get(&sd, log); err == nil || sd != nil {
			t.Fatal("a failed dial gave a connection")
		}
	}
	if n := strings.Count(logs.String(), "connecting to santad"); n != 1 {
		t.Errorf("a run of failed dials logged %d times; want once", n)
	}
	fail = false
	c, err := d.Get(&sd, log)
	if err != nil || c != sd || len(dialled) != 1 {
		t.Fatalf("Get: %v, %v", c, err)
	}
	if again, _ := d.Get(&sd, log); again != c || len(dialled) != 1 {
		t.Fatal("Get dialled again with a connection")
	}
	refusal := protocol.Errorf(syscall.ENOENT, "no service 7")
	if Drop(&sd, log, "detaching", refusal) || sd != c || c.closed {
		t.Fatal("a refusal dropped the connection")
	}
	if !Drop(&sd, log, "listing", errors.New("EOF")) || sd != nil || !c.closed {
		t.Fatal("a broken connection was kept")
	}
}

// A failing scan is logged once while it fails alike, again when its
// failure changes, and its end once.
func TestScanLog(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var l ScanLog
	two := errors.New("held by two users")
	for _, err := range []error{nil, two, two, two, errors.New("no /proc"), nil, nil, two} {
		if err != nil {
			l.Failed(log, "scanning", err)
		} else {
			l.Worked(log, "scanning")
		}
	}
	got := strings.Count(logs.String(), "held by two users") + 10*strings.Count(logs.String(), "no /proc") +
		100*strings.Count(logs.String(), "working again")
	if got != 2+10+100 {
		t.Errorf("logged:\n%s\nwant each failure once a run (two runs of the first), and one recovery", logs.String())
	}
}

// A socket that fails to be taken up is logged once while it fails alike,
// each socket for itself, and again once it is gone and back (a new
// failure of the same kind: the server restarted, say).
func TestTakeLog(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var l TakeLog
	denied := errors.New("taking 1: operation not permitted")
	a, b := server.Socket{Inode: 1}, server.Socket{Inode: 2}
	for range 10 {
		l.Failed(log, a.Inode, "taking up", denied)
		l.Failed(log, b.Inode, "taking up", denied)
		l.Keep([]server.Socket{a, b})
	}
	if n := strings.Count(logs.String(), "not permitted"); n != 2 {
		t.Fatalf("10 scans, 2 sockets failing: %d lines; want 2:\n%s", n, logs.String())
	}
	l.Worked(log, b.Inode, "taking up")
	l.Worked(log, b.Inode, "taking up")
	if n := strings.Count(logs.String(), "working again"); n != 1 {
		t.Fatalf("%d lines say a socket was taken up; want 1:\n%s", n, logs.String())
	}
	l.Keep(nil) // a is gone
	l.Failed(log, a.Inode, "taking up", denied)
	if n := strings.Count(logs.String(), "not permitted"); n != 3 {
		t.Fatalf("a socket failing again after it was gone: %d lines in all; want 3:\n%s", n, logs.String())
	}
}
