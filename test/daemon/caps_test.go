package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// santad as a user (nobody): without capabilities it says what it needs
// before it touches anything; with CAP_BPF and CAP_NET_ADMIN alone it
// names the others, before the kernel's words; with the four that
// docs/operations.md names, and directories of its own, it runs and
// answers.
func TestCapabilities(t *testing.T) {
	own, err := os.MkdirTemp(shared, "caps")
	if err == nil {
		err = os.Chmod(own, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(own) })
	bpffs, run := filepath.Join(own, "bpf"), filepath.Join(own, "run")
	for _, dir := range []string{bpffs, run} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(run, nobody.uid, nobody.uid); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("bpf", bpffs, "bpf", 0, "uid=65534,gid=65534,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(bpffs, unix.MNT_DETACH) })

	e := prepareEnv(t, "p", "")
	e.d.Socket, e.d.StateDir, e.d.PinPath = filepath.Join(run, "santa.sock"), filepath.Join(run, "state"), filepath.Join(bpffs, "santa")
	const all = "CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN and CAP_SYSLOG"
	for _, c := range []struct{ caps, want string }{
		{"", "santad: needs root, or the capabilities " + all + ", and lacks CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN, CAP_SYSLOG: run it as root (sudo) or with them\n"},
		{"+bpf,+net_admin", "santad: opening the data plane: needs root, or the capabilities " + all + ", and lacks CAP_PERFMON, CAP_SYSLOG: run it as root (sudo) or with them; the kernel said: "},
	} {
		e.d.Launch = asNobodyWith(e.ns, c.caps)
		err := e.d.Start()
		e.d.Kill()
		if err == nil || !strings.Contains(err.Error(), "\n"+c.want) {
			t.Errorf("santad as nobody with capabilities %q: %v; want it to say %q", c.caps, err, c.want)
		}
		if _, err := os.Stat(e.d.StateDir); c.caps == "" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("santad without capabilities made %s: %v", e.d.StateDir, err)
		}
	}

	e.d.Launch = asNobodyWith(e.ns, "+bpf,+perfmon,+net_admin,+syslog")
	if err := e.d.Start(); err != nil {
		t.Fatal(err)
	}
	c, sock, svc := e.attachedUDP(t)
	if _, err := c.AddRules(svc.ServiceID, []rule.Rule{pingRule}); err != nil {
		t.Fatal(err)
	}
	if got, err := santadtest.Ask(e.dialUDP(t, portOf(sock)), []byte("ping"), time.Second); err != nil || string(got) != "pong" {
		t.Errorf("santad as nobody with the four capabilities: %q, %v; want the kernel's pong", got, err)
	}
}

// asNobodyWith launches santad in ns as nobody with the capabilities caps
// (setpriv's list, "" for none).
func asNobodyWith(ns *santadtest.Netns, caps string) func(context.Context, string, ...string) *exec.Cmd {
	return func(ctx context.Context, name string, args ...string) *exec.Cmd {
		argv := []string{"--reuid=65534", "--regid=65534", "--clear-groups"}
		if caps != "" {
			argv = append(argv, "--inh-caps="+caps, "--ambient-caps="+caps)
		}
		return ns.Command(ctx, "setpriv", append(append(argv, "--", name), args...)...)
	}
}
