package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/procsock"
)

// TestAttachPortChecksTheUserAtTake: a socket attach -port found is taken
// only if its holder still runs as the user it ran as when found (oneUser):
// its pid may have gone to another user's process since. Here the user
// noted is another than this process's.
func TestAttachPortChecksTheUserAtTake(t *testing.T) {
	fd, err := reuseUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	self, err := procsock.UserOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	other := self
	other[0]++
	h := held{pid: os.Getpid(), fd: fd, inode: st.Ino, user: other}
	// No santad there: the take is to be refused before it is dialed.
	e := &env{global: globalOptions{socket: filepath.Join(t.TempDir(), "none.sock")}}
	if _, err := (&attachOptions{}).attach(context.Background(), e, h); err == nil || !strings.Contains(err.Error(), "its user when found") {
		t.Fatalf("attach of a socket whose holder runs as %v, found as %v's: %v; want a refusal", self, other, err)
	}
}
