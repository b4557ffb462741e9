// Package deploy_test checks the files deploy/ installs.
package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// units are deploy/'s unit files: make install and the package install
// every one.
func units(t *testing.T) []string {
	t.Helper()
	units, err := filepath.Glob("*.service")
	if err != nil || len(units) < 2 {
		t.Fatalf("unit files %q, %v", units, err)
	}
	return units
}

// TestUnitsExecStart checks that every unit runs its command from
// /usr/sbin, which make install rewrites to its SBINDIR: a unit naming
// another directory would run a binary the package does not have.
func TestUnitsExecStart(t *testing.T) {
	for _, unit := range units(t) {
		data, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^ExecStart=(\S+)`).FindAllStringSubmatch(string(data), -1) {
			if !strings.HasPrefix(m[1], "/usr/sbin/") {
				t.Errorf("%s: ExecStart=%s, want /usr/sbin/...", unit, m[1])
			}
		}
	}
}

// maxExposure is the most `systemd-analyze security` may rate a unit
// (issue 25: <= 4.0, "OK").
const maxExposure = 4.0

var exposure = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// TestUnitSecurity rates every unit offline, as `systemd-analyze
// security --offline=true` does on Debian 12's systemd 252 and later.
func TestUnitSecurity(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze: apt-get install systemd")
	}
	if out, _ := exec.Command("systemd-analyze", "security", "--help").CombinedOutput(); !strings.Contains(string(out), "--offline") {
		t.Skip("this systemd-analyze has no --offline (systemd < 252): cannot rate unit files")
	}
	for _, unit := range units(t) {
		path, _ := filepath.Abs(unit) // a path, not a name: never an installed unit
		out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", path).CombinedOutput()
		m := exposure.FindSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no exposure level in systemd-analyze's output (%v):\n%s", unit, err, out)
		}
		score, _ := strconv.ParseFloat(string(m[1]), 64)
		if score > maxExposure {
			t.Errorf("%s: exposure %.1f, want at most %.1f:\n%s", unit, score, maxExposure, out)
		} else {
			t.Logf("%s: exposure %.1f", unit, score)
		}
	}
}

// TestUnitsVerify runs `systemd-analyze verify` on the units: unknown
// options and malformed lines. It ignores the binaries and man pages not
// being installed where the tests run.
func TestUnitsVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze: apt-get install systemd")
	}
	for _, unit := range units(t) {
		path := unit
		if strings.HasSuffix(unit, "@.service") { // verify wants an instance
			dir := t.TempDir()
			path = dir + "/" + strings.Replace(unit, "@.", "@named.", 1)
			data, err := os.ReadFile(unit)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, _ := exec.Command("systemd-analyze", "verify", "--man=no", path).CombinedOutput()
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line == "" || strings.Contains(line, "is not executable") || strings.Contains(line, "Unit is bound to inactive unit") {
				continue
			}
			t.Errorf("%s: %s", unit, line)
		}
	}
}
