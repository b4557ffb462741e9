package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runFake runs santad (Run) on a fake data plane with cfg until the test
// ends, and waits until its socket is there.
func runFake(t *testing.T, cfg Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, func(bool) (Plane, error) { return fakePlane{newFakeDP()}, nil },
			slog.New(slog.NewTextHandler(io.Discard, nil)), Reload{})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(cfg.Socket); err == nil {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned before listening: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no socket after 10 s")
		}
	}
}

// publicDir is a fresh directory every user may enter (t.TempDir's
// parent is private to root).
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "santa-daemon-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// santad started by hand, with its socket and journal under one directory
// it creates (/run/santa/santa.sock and /run/santa/state by default):
// a member of the socket's group reaches the socket, however the state
// directory was made first; the state directory stays private.
func TestSocketGroupReachesSocket(t *testing.T) {
	requireRoot(t)
	run := filepath.Join(publicDir(t), "run", "santa")
	cfg := DefaultConfig()
	cfg.Socket = filepath.Join(run, "santa.sock")
	cfg.StateDir = filepath.Join(run, "state")
	cfg.SocketGroup = strconv.Itoa(adminGID)
	cfg.Interfaces = []string{"lo"}
	runFake(t, cfg)

	member := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{adminGID}}}
	out, err := clientCmd(t, member, "hello", cfg.Socket).Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != "uid=65534 admin=false" {
		t.Errorf("a member of the socket's group: %q, %v", got, err)
	}
	for dir, want := range map[string]os.FileMode{run: 0o755, cfg.StateDir: 0o700} {
		if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %#o", dir, st.Mode(), err, want)
		}
	}
}

// A second santad on the state directory of one that runs is refused,
// naming the first's pid.
func TestStateDirLocked(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Socket = filepath.Join(dir, "santa.sock")
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.Interfaces = []string{"lo"}
	runFake(t, cfg)
	cfg.Socket = filepath.Join(dir, "other.sock")
	err := Run(context.Background(), cfg, func(bool) (Plane, error) {
		t.Error("the second santad opened the data plane")
		return fakePlane{newFakeDP()}, nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)), Reload{})
	want := "the state directory " + cfg.StateDir + " is in use by process " + strconv.Itoa(os.Getpid()) + ", another santad"
	if err == nil || err.Error() != want {
		t.Errorf("second Run: %v; want %q", err, want)
	}
}
