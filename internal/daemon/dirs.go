package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The socket's directory and the state directory are often siblings under
// one parent santad creates (/run/santa/santa.sock, /run/santa/state), and
// whichever santad creates first makes that parent. So every directory
// santad creates on the way is 0755, as the socket's must be for its group
// to reach it; only the state directory itself is private.
const (
	publicDirMode = 0o755
	stateDirMode  = 0o700
)

// mkdirs creates dir, with mode perm, and the directories missing on the
// way to it, with publicDirMode; whatever the umask. Directories that exist
// are the operator's and left as they are.
func mkdirs(dir string, perm os.FileMode) error {
	if parent := filepath.Dir(dir); parent != dir {
		if _, err := os.Stat(parent); errors.Is(err, os.ErrNotExist) {
			if err := mkdirs(parent, publicDirMode); err != nil {
				return err
			}
		}
	}
	if err := os.Mkdir(dir, perm); errors.Is(err, os.ErrExist) {
		return nil
	} else if err != nil {
		return err
	}
	if err := os.Chmod(dir, perm); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", dir, err)
	}
	return nil
}
