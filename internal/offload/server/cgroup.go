package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cgroupFS is where cgroup hierarchies are mounted.
const cgroupFS = "/sys/fs/cgroup"

// cgroup2Root is the cgroup v2 hierarchy: /sys/fs/cgroup, or its "unified"
// child on a host that mounts v1 controllers there.
func cgroup2Root() (string, error) {
	for _, dir := range []string{cgroupFS, filepath.Join(cgroupFS, "unified")} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no cgroup v2 hierarchy at %s", cgroupFS)
}

// cgroupDir is the directory of cgroup rel under root, or "" for the root
// cgroup: it holds every process not in a child, so following it is
// following every process.
func cgroupDir(root, rel string) string {
	rel = strings.Trim(filepath.Clean("/"+rel), "/")
	if rel == "" {
		return ""
	}
	return filepath.Join(root, rel)
}

// cgroupOf is the cgroup v2 path of process pid ("/system.slice/x"), the
// "0::" line of /proc/PID/cgroup; "/" without cgroup v2.
func cgroupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", fmt.Errorf("process %d: %w", pid, err)
	}
	lines := bufio.NewScanner(bytes.NewReader(b))
	for lines.Scan() {
		if path, ok := strings.CutPrefix(lines.Text(), "0::"); ok {
			return path, nil
		}
	}
	return "/", nil
}

// unitName is a unit name with its type: "named" is "named.service".
func unitName(u string) string {
	if strings.Contains(u, ".") {
		return u
	}
	return u + ".service"
}

// cgroupProcs is the processes of the cgroup at dir and of its children.
// A cgroup that does not exist (the unit is stopped) has none.
func cgroupProcs(dir string) ([]int, error) {
	var pids []int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // gone meanwhile, or never there
		case err != nil:
			return err
		case !d.IsDir():
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}
