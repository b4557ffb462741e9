package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mountBPFFS mounts bpffs at dir unless it is already there: these machines
// do not mount it at boot.
func mountBPFFS(dir string) error { return mountFS(dir, "bpf", unix.BPF_FS_MAGIC) }

// cgroup2Root is the cgroup v2 hierarchy to attach to for dir. On a hybrid
// host dir holds the v1 controllers (a tmpfs) and v2 is dir/unified: that
// is used, and nothing is ever mounted over controllers that other programs
// rely on. Only where dir is no mount of its own (`ip netns exec` gives a
// process a fresh /sys without cgroups) is cgroup2 mounted there.
func cgroup2Root(dir string) (string, error) {
	if err := checkCgroupPath(dir); err != nil {
		return "", err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return dir, nil
	}
	unified := filepath.Join(dir, "unified")
	if err := unix.Statfs(unified, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return unified, nil
	}
	if err := unix.Statfs(dir, &st); err == nil && st.Type != unix.SYSFS_MAGIC {
		return "", fmt.Errorf("%s is a mount without a cgroup v2 hierarchy: not mounting over it", dir)
	}
	return dir, mountFS(dir, "cgroup2", unix.CGROUP2_SUPER_MAGIC)
}

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
