package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// `ip netns exec NS santad` runs santad in a mount namespace of its own,
// with NS's sysfs mounted over /sys, and nothing mounted below it: no
// bpffs at /sys/fs/bpf, no cgroups at /sys/fs/cgroup. A bpffs santad
// mounted there would be an instance of its own, gone with santad: its
// pins too, so the data plane would stop answering when santad stops and
// a restart would find nothing to take over. santad refuses that, saying
// what to do instead. (The host's bpffs is out of reach from there: its
// mount was detached, and /proc/1/root may be denied.)

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

// checkPinParent refuses a pin path whose bpffs santad would mount itself
// under `ip netns exec`.
func checkPinParent(parent string) error {
	var st unix.Statfs_t
	if unix.Statfs(parent, &st) == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if ns := ipNetnsExec(); ns != "" {
		return ipNetnsExecError(ns, "a bpffs mounted at "+parent+" would vanish with santad, and its pins and data plane with it",
			"set pin_path to a directory on a bpffs the host mounted outside /sys")
	}
	return nil
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
