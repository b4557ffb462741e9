package datapath

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mountBPFFS mounts bpffs at dir unless it is already there: these machines
// do not mount it at boot.
func mountBPFFS(dir string) error { return mountFS(dir, "bpf", unix.BPF_FS_MAGIC) }

// mountCgroup2 mounts the cgroup v2 hierarchy at dir unless it is there:
// `ip netns exec` gives a process a fresh /sys without it.
func mountCgroup2(dir string) error { return mountFS(dir, "cgroup2", unix.CGROUP2_SUPER_MAGIC) }

func mountFS(dir, fstype string, magic int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == magic {
		return nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checking %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := unix.Mount(fstype, dir, fstype, 0, ""); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", fstype, dir, err)
	}
	return nil
}
