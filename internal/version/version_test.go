package version

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestLine(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "5e7dcfb0a1b2c3d4e5f60718293a4b5c6d7e8f90"},
		{Key: "vcs.time", Value: "2026-11-26T17:39:51Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name, ldflags string
		bi            debug.BuildInfo
		want          string
	}{
		{"checkout, modified", "", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261126173951-5e7dcfb0a1b2+dirty"}, Settings: vcs},
			"santad v0.0.0-20261126173951-5e7dcfb0a1b2+dirty commit 5e7dcfb0a1b2 (2026-11-26T17:39:51Z, modified) go1.26.8"},
		{"clean checkout", "", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.0.0"}, Settings: vcs[:2]},
			"santad v1.0.0 commit 5e7dcfb0a1b2 (2026-11-26T17:39:51Z) go1.26.8"},
		{"package, ldflags", "1.2.3-1", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"santad 1.2.3-1 go1.26.8"},
		{"no build information", "", debug.BuildInfo{}, "santad (devel)"},
	} {
		if got := line("santad", tc.ldflags, &tc.bi); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
}

// The commands answer --version and -version with one line that starts
// with their name, and exit 0; -ldflags -X sets the version. (santad
// needs the BPF objects to build, which this package must not:
// test/daemon TestVersion runs its --version.)
func TestCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	dir := t.TempDir()
	for _, name := range []string{"santactl", "santa-offload"} {
		bin := filepath.Join(dir, name)
		build := exec.Command(gobin, "build", "-ldflags", "-X github.com/santa-offload/santa/internal/version.Version=9.8.7", "-o", bin,
			"github.com/santa-offload/santa/cmd/"+name)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", name, err, out)
		}
		for _, flag := range []string{"--version", "-version"} {
			out, err := exec.Command(bin, flag).Output()
			want := regexp.MustCompile(`^` + name + ` 9\.8\.7 .*go1\.[0-9.]+\n$`)
			if err != nil || !want.Match(out) {
				t.Errorf("%s %s: %q, %v; want one line %v", name, flag, out, err, want)
			}
			if strings.Count(string(out), "\n") != 1 {
				t.Errorf("%s %s prints %d lines", name, flag, strings.Count(string(out), "\n"))
			}
		}
	}
}
