package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// `ip netns exec NS santad` runs santad in a mount namespace of its own,
// with NS's sysfs mounted over /sys, and nothing mounted below it: no
// bpffs at /sys/fs/bpf, no cgroups at /sys/fs/cgroup. A bpffs santad
// mounted there would be an instance of its own, gone with santad: its
// pins too, so the data plane would stop answering when santad stops and
// a restart would find nothing to take over. So santad pins where the
// command was typed: on the bpffs of the mount namespace it left.

// ipNetnsExec is the network namespace `ip netns exec` runs this process
// in, or "": that command mounts the namespace's sysfs over /sys with the
// namespace's name as the mount's source
// ("54 50 0:40 / /sys rw,relatime - sysfs NS rw" in mountinfo).
func ipNetnsExec() string {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	ns := ""
	for line := range strings.Lines(string(mounts)) {
		mount, source, _ := strings.Cut(line, " - ")
		m, s := strings.Fields(mount), strings.Fields(source)
		if len(m) < 5 || m[4] != "/sys" || len(s) < 2 || s[0] != "sysfs" {
			continue
		}
		ns = "" // the last mount at /sys is the one seen
		if _, err := os.Stat(filepath.Join("/run/netns", s[1])); s[1] != "sysfs" && err == nil {
			ns = s[1]
		}
	}
	return ns
}

// ipNetnsExecError is the error of a path that cannot be used under
// `ip netns exec ns`, with what to do instead.
func ipNetnsExecError(ns, problem, fix string) error {
	return fmt.Errorf("santad runs under `ip netns exec %s`, which mounts a /sys of its own: %s. "+
		"Start santad with `nsenter --net=/run/netns/%s santad ...` (it joins the network namespace only), or %s",
		ns, problem, ns, fix)
}

// hostPinPath is the pin path dir of a santad under `ip netns exec`:
// dir as the process that ran the command sees it. That is santad's
// nearest ancestor in another mount namespace (the shell); dir's parent
// is opened as it sees it, through /proc/PID/root, and dir named through
// the open directory (/proc/self/fd/N/NAME), which outlives the ancestor:
// held, to keep open. Without ip netns exec, or with dir's parent a bpffs
// already (one the host mounted outside /sys), dir is kept as it is.
func hostPinPath(dir string, log *slog.Logger) (path string, held *os.File, err error) {
	parent, err := filepath.Abs(filepath.Dir(dir))
	if err != nil || isFS(parent, unix.BPF_FS_MAGIC) {
		return dir, nil, err
	}
	ns := ipNetnsExec()
	if ns == "" {
		return dir, nil, nil
	}
	refused := ipNetnsExecError(ns, "a bpffs mounted at "+parent+" would vanish with santad, and its pins and data plane with it, "+
		"and the process that ran the command has no bpffs there either",
		"set pin_path to a directory on a bpffs the host mounted outside /sys")
	pid, err := outerAncestor()
	if err != nil {
		return "", nil, fmt.Errorf("%w (%v)", refused, err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/root%s", pid, parent))
	if err != nil {
		return "", nil, fmt.Errorf("%w (%v)", refused, err)
	}
	if !isFS(f.Name(), unix.BPF_FS_MAGIC) {
		f.Close()
		return "", nil, refused
	}
	path = fmt.Sprintf("/proc/self/fd/%d/%s", f.Fd(), filepath.Base(dir))
	log.Info("santad runs under ip netns exec: pinning on the bpffs of the mount namespace it was started from",
		"netns", ns, "pin_path", dir, "as_seen_by_pid", pid)
	return path, f, nil
}

// outerAncestor is the nearest ancestor of this process in another mount
// namespace.
func outerAncestor() (int, error) {
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return 0, err
	}
	for pid := os.Getppid(); pid > 1; {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil {
			return 0, err
		}
		if ns != own {
			return pid, nil
		}
		if pid, err = parentOf(pid); err != nil {
			return 0, err
		}
	}
	return 0, errors.New("no ancestor in another mount namespace")
}

// parentOf is the parent of process pid: the field after the command in
// /proc/PID/stat ("1234 (sh) S 1200 ...").
func parentOf(pid int) (int, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	_, rest, _ := bytes.Cut(stat, []byte(") "))
	fields := strings.Fields(string(rest))
	if len(fields) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: no parent in %q", pid, stat)
	}
	return strconv.Atoi(fields[1])
}

func isFS(path string, magic int64) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == magic
}

// checkCgroupPath refuses a cgroup path missing under `ip netns exec`
// (a hybrid host's /sys/fs/cgroup/unified): there is nothing to mount
// cgroup v2 on.
func checkCgroupPath(dir string) error {
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if ns := ipNetnsExec(); ns != "" {
		return ipNetnsExecError(ns, "cgroup_path "+dir+" does not exist there",
			"set cgroup_path to /sys/fs/cgroup (santad mounts cgroup v2 there)")
	}
	return nil
}
