package daemon

import (
	"os/exec"
	"regexp"
	"testing"
)

// santad --version (and -version) prints its version line and exits 0,
// before anything that needs root.
func TestVersion(t *testing.T) {
	requireRoot(t) // TestMain builds santad as root only
	want := regexp.MustCompile(`^santad \S+ .*go1\.[0-9.]+\n$`)
	for _, flag := range []string{"--version", "-version"} {
		out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", santadBin, flag).Output()
		if err != nil || !want.Match(out) {
			t.Errorf("santad %s as nobody: %q, %v; want one line %v", flag, out, err, want)
		}
	}
}
