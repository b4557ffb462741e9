package datapath

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// neededCaps are the capabilities the data plane needs without root:
// loading the programs (CAP_BPF; CAP_PERFMON for their pointer work;
// CAP_SYSLOG to read the kernel symbols they call), and attaching them to
// interfaces and cgroups (CAP_NET_ADMIN). As measured: santad as nobody
// with these four, and write access to its pin path, state directory and
// socket directory, runs (docs/operations.md).
var neededCaps = []struct {
	bit  uint
	name string
}{{unix.CAP_BPF, "CAP_BPF"}, {unix.CAP_PERFMON, "CAP_PERFMON"}, {unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"}, {unix.CAP_SYSLOG, "CAP_SYSLOG"}}

// RequireCapabilities refuses, saying what to do, a process that cannot
// run the data plane whatever else it has: one without CAP_NET_ADMIN, or
// without CAP_BPF and CAP_SYS_ADMIN (which stands in for it). santad asks
// before anything else: as a user it would otherwise fail on the first
// directory it creates.
func RequireCapabilities() error {
	missing, effective := missingCaps()
	if effective&(1<<unix.CAP_NET_ADMIN) != 0 && effective&(1<<unix.CAP_BPF|1<<unix.CAP_SYS_ADMIN) != 0 {
		return nil
	}
	return errors.New(capsMessage(missing))
}

// explainCaps puts what to do before err, an error of Open, when this
// process lacks a capability it needs: the kernel's own words
// ("failed to set memlock rlimit: operation not permitted", "symbol
// veth_xmit: restricted by kernel.kptr_restrict") do not say so.
func explainCaps(err error) error {
	if missing, _ := missingCaps(); len(missing) > 0 {
		return fmt.Errorf("%s; the kernel said: %w", capsMessage(missing), err)
	}
	return err
}

func capsMessage(missing []string) string {
	return "needs root, or the capabilities CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN and CAP_SYSLOG, and lacks " +
		strings.Join(missing, ", ") + ": run it as root (sudo) or with them"
}

// missingCaps are the names of neededCaps not in this process's effective
// set, and that set.
func missingCaps() (missing []string, effective uint64) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return nil, ^uint64(0) // cannot tell: the kernel's errors stand alone
	}
	effective = uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	for _, c := range neededCaps {
		if effective&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	return slices.Clip(missing), effective
}
