package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// `ip netns exec NS santad` gives santad a mount namespace of its own with
// NS's sysfs over /sys and no bpffs below it. santad pins on the bpffs of
// the namespace the command was typed in, as under nsenter: the data plane
// outlives santad and the next santad takes it over, rules and all. Where
// that namespace has no bpffs there either, or cgroup_path names what the
// fresh /sys has not, santad refuses, saying to use nsenter --net.
func TestIPNetnsExec(t *testing.T) {
	e := prepareEnv(t, "x", "")
	nsenter := "nsenter --net=/run/netns/" + e.ns.Name
	for _, c := range []struct {
		name   string
		launch func(context.Context, string, ...string) *exec.Cmd
		args   []string
		want   string
	}{
		{"typed where /sys/fs/bpf is no bpffs", func(ctx context.Context, name string, args ...string) *exec.Cmd {
			// sh runs ip netns exec in a mount namespace without bpffs, and
			// stays santad's parent (the exit keeps it from exec'ing ip).
			script := `umount -l /sys/fs/bpf && ip netns exec "$0" "$@"; exit $?`
			return exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, e.ns.Name, name}, args...)...)
		}, nil, "a bpffs mounted at /sys/fs/bpf would vanish with santad"},
		{"cgroup_path missing from the fresh /sys", e.ns.IPNetnsExec, []string{"-cgroup-path", "/sys/fs/cgroup/unified"},
			"cgroup_path /sys/fs/cgroup/unified does not exist there"},
	} {
		refused := santadtest.New(e.d.Bin(), e.ns, t.TempDir(), e.d.PinPath, c.args...)
		refused.Launch = c.launch
		err := refused.Start()
		refused.Kill()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), nsenter) {
			t.Errorf("%s: %v; want it refused: %q, and %q", c.name, err, c.want, nsenter)
		}
	}

	e.d.Launch = e.ns.IPNetnsExec
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
