package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// `ip netns exec NS santad` gives santad a mount namespace of its own with
// NS's sysfs over /sys and no bpffs below it. santad refuses to pin on a
// bpffs it would mount there (gone with santad, and the data plane with
// it), saying to use nsenter --net; with its pins on a bpffs the host
// mounted, it works as under nsenter: the data plane outlives santad and
// the next santad takes it over, rules and all.
func TestIPNetnsExec(t *testing.T) {
	bpffs := t.TempDir()
	if err := unix.Mount("bpf", bpffs, "bpf", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(bpffs, unix.MNT_DETACH) })
	e := prepareEnv(t, "x", "")
	e.d.Launch = e.ns.IPNetnsExec
	nsenter := "nsenter --net=/run/netns/" + e.ns.Name
	for _, c := range []struct{ pinPath, cgroupPath, want string }{
		{e.d.PinPath, "/sys/fs/cgroup", "a bpffs mounted at /sys/fs/bpf would vanish with santad"},
		{filepath.Join(bpffs, "santa"), "/sys/fs/cgroup/unified", "cgroup_path /sys/fs/cgroup/unified does not exist there"},
	} {
		refused := santadtest.New(e.d.Bin(), e.ns, t.TempDir(), c.pinPath, "-cgroup-path", c.cgroupPath)
		refused.Launch = e.ns.IPNetnsExec
		err := refused.Start()
		refused.Kill()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), nsenter) {
			t.Errorf("santad under ip netns exec with pins at %s and cgroup_path %s: %v; want it refused: %q, and %q",
				c.pinPath, c.cgroupPath, err, c.want, nsenter)
		}
	}

	e.d.PinPath = filepath.Join(bpffs, "santa")
	if err := e.d.Start(); err != nil {
		t.Fatal(err)
	}
	for _, pin := range []string{"services", "link_xdp_generic_lo", "link_sock_release"} {
		if _, err := os.Stat(filepath.Join(e.d.PinPath, pin)); err != nil {
			t.Errorf("the host's bpffs has no %s: %v", pin, err)
		}
	}
	c, sock, svc := e.attachedUDP(t)
	if _, err := c.AddRules(svc.ServiceID, []rule.Rule{pingRule}); err != nil {
		t.Fatal(err)
	}
	q := e.dialUDP(t, portOf(sock))
	ask := func(when string) {
		t.Helper()
		if got, err := santadtest.Ask(q, []byte("ping"), time.Second); err != nil || string(got) != "pong" {
			t.Fatalf("%s: %q, %v; want the kernel's pong", when, got, err)
		}
	}
	ask("with santad running")
	c.Close()
	if err := e.d.Stop(); err != nil {
		t.Fatal(err)
	}
	ask("santad stopped")
	if err := e.d.Start(); err != nil {
		t.Fatal(err)
	}
	ask("santad restarted")
	svcs, err := e.client(t).Services()
	if err != nil || len(svcs) != 1 || svcs[0].Rules != 1 {
		t.Errorf("after the restart, santad lists %+v, %v; want the service with its rule", svcs, err)
	}
}
