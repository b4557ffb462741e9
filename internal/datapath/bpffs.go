package datapath

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mountBPFFS mounts bpffs at dir unless it is already there: these machines
// do not mount it at boot.
func mountBPFFS(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checking %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		return fmt.Errorf("mounting bpffs at %s: %w", dir, err)
	}
	return nil
}
