package kubernetes

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestMountBPFFSScript runs the init container's script, as rendered, on a
// directory of a private mount namespace: it mounts bpffs where there is
// none, and a second run (the pod restarted) mounts nothing more.
func TestMountBPFFSScript(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	r := render(t, map[string]any{
		"hostPaths": map[string]any{"bpffs": dir},
		"santad":    map[string]any{"config": map[string]any{"pin_path": filepath.Join(dir, "santa")}},
	})
	init := find[*appsv1.DaemonSet](r, "r1-santad").Spec.Template.Spec.InitContainers[0]
	if len(init.Command) != 3 || init.Command[0] != "/bin/sh" || init.Command[1] != "-ec" {
		t.Fatalf("init command %q: not a shell script", init.Command)
	}
	script := init.Command[2]
	// Both runs and the checks in one private mount namespace, which takes
	// the mount with it when the shell exits.
	check := script + script + "stat -f -c %T " + dir + "\ngrep -c ' " + dir + " ' /proc/self/mountinfo\n"
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-ec", check).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 2 || got[0] != "bpf_fs" || got[1] != "1" {
		t.Fatalf("after two runs: %q, want bpf_fs mounted once", out)
	}
}
