package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/daemon/journal"
)

// A state directory that exists is used as it is, whoever owns it and
// whoever may write it: santad (root) restores every service and rule of
// the journal found there at start. With state_dir somewhere another user
// could create it first (under /tmp, /var/tmp, a home), that user plants a
// journal. santad should refuse a state directory (and a socket
// directory) that is not root's or that others may write, as sshd and
// systemd do for theirs.
func TestStateDirOfAnotherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give the directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockState(dir)
	if err != nil {
		return // refused: fixed
	}
	defer unlock()
	j, _, err := journal.Open(dir)
	if err == nil {
		j.Close()
		t.Errorf("santad takes %s, owned by uid 65534 and mode 0777, as its state directory", dir)
	}
}

// Which state directories santad takes: its own, made by it or by root
// (0700 or 0755), and none that another user owns or that others may
// write, sticky or not (in a sticky one, they could still add a journal).
// The refusal names the directory, its owner and mode, and what to do.
func TestStateDirChecked(t *testing.T) {
	requireRoot(t)
	for _, c := range []struct {
		name     string
		mode     os.FileMode
		uid, gid int
		ok       bool
		octal    string // the mode as the refusal gives it
	}{
		{name: "made by santad", ok: true},
		{name: "root's 0700", mode: 0o700, ok: true},
		{name: "root's 0755", mode: 0o755, ok: true},
		{name: "root's 0770", mode: 0o770, octal: "0770"},
		{name: "root's 0703", mode: 0o703, octal: "0703"},
		{name: "root's sticky 1777", mode: 0o777 | os.ModeSticky, octal: "1777"},
		{name: "nobody's 0700", mode: 0o700, uid: 65534, gid: 65534, octal: "0700"},
		{name: "nobody's 0777", mode: 0o777, uid: 65534, gid: 65534, octal: "0777"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if c.mode != 0 {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, c.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(dir, c.uid, c.gid); err != nil {
					t.Fatal(err)
				}
			}
			unlock, err := lockState(dir)
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				unlock()
				return
			}
			if err == nil {
				unlock()
				t.Fatalf("%s taken as the state directory", dir)
			}
			want := fmt.Sprintf("refusing the state directory %s: it is owned by %s, group %s, mode %s;",
				dir, userName(uint32(c.uid)), groupName(uint32(c.gid)), c.octal)
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chown root: "+dir) {
				t.Errorf("error %q; want one with %q and what to do", err, want)
			}
			if _, err := os.Lstat(filepath.Join(dir, "lock")); err == nil {
				t.Errorf("a lock file made in the refused %s", dir)
			}
		})
	}
}

// The lock file is not followed when it is a symbolic link: santad would
// create or open the file it points to.
func TestStateLockNotFollowed(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "elsewhere")
	if err := os.Symlink(target, filepath.Join(state, "lock")); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockState(state)
	if err == nil {
		unlock()
		t.Fatal("a lock file that is a symbolic link followed")
	}
	if !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("error %q; want it to say the lock file is a symbolic link", err)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Errorf("the lock file's link followed: %s created", target)
	}
}

// santad creates its socket, and sets its group and mode, only in a
// directory nobody else may write, or a sticky one of root's (/tmp), in
// which nobody else may swap santad's socket for a symbolic link.
func TestSocketDirChecked(t *testing.T) {
	requireRoot(t)
	for _, c := range []struct {
		name     string
		mode     os.FileMode
		uid, gid int
		ok       bool
	}{
		{"made by santad", 0, 0, 0, true},
		{"root's 0755", 0o755, 0, 0, true},
		{"root's sticky 1777", 0o777 | os.ModeSticky, 0, 0, true},
		{"root's 0775", 0o775, 0, 0, false},
		{"root's 0777", 0o777, 0, 0, false},
		{"nobody's 0755", 0o755, 65534, 65534, false},
		{"nobody's sticky 1777", 0o777 | os.ModeSticky, 65534, 65534, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if c.mode != 0 {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, c.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(dir, c.uid, c.gid); err != nil {
					t.Fatal(err)
				}
			}
			cfg := DefaultConfig()
			cfg.Socket = filepath.Join(dir, "santa.sock")
			cfg.SocketGroup = strconv.Itoa(adminGID)
			l, err := listen(cfg)
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				if st, err := os.Lstat(cfg.Socket); err != nil || st.Mode().Perm() != 0o660 || st.Sys().(*syscall.Stat_t).Gid != adminGID {
					t.Errorf("the socket: %v, %v; want mode 0660, group %d", st.Mode(), err, adminGID)
				}
				return
			}
			if err == nil {
				l.Close()
				t.Fatalf("a socket made in %s, mode %v, uid %d", dir, c.mode, c.uid)
			}
			if !strings.Contains(err.Error(), "refusing the socket's directory "+dir+": it is owned by "+userName(uint32(c.uid))) {
				t.Errorf("error %q; want it to name %s and its owner", err, dir)
			}
			if _, err := os.Lstat(cfg.Socket); err == nil {
				t.Errorf("a socket made in the refused %s", dir)
			}
		})
	}
}

// The socket's mode is not set through a symbolic link.
func TestChmodSocketNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "file")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "santa.sock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := chmodSocket(link, 0o666); err == nil {
		t.Error("a symbolic link's target chmodded")
	}
	if st, err := os.Stat(target); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the link's target: %v, %v; want it left 0600", st.Mode(), err)
	}
}

// The advice names the user santad runs as: a directory only root may
// write is no use to a santad that is not root.
func TestDirOwnerAdvice(t *testing.T) {
	for euid, want := range map[uint32]string{0: "root", 65534: "nobody", 4242424: "4242424"} {
		if got := dirOwner(euid); got != want {
			t.Errorf("dirOwner(%d) = %q, want %q", euid, got, want)
		}
	}
}
