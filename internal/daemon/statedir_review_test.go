package daemon

import (
	"os"
	"path/filepath"
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
