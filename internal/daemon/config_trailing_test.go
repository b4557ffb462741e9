package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// santad's configuration, like the agents', is read up to the end of its
// first JSON value: what follows (a second object pasted in, a stray
// brace) is silently ignored instead of refused.
func TestLoadConfigRefusesTrailingData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "santad.json")
	os.WriteFile(path, []byte(`{"max_services": 100} {"admin_group": "wheel"}`), 0o644)
	cfg, err := LoadConfig(path)
	if err == nil {
		t.Fatalf("a file with a second object accepted (admin_group %q)", cfg.AdminGroup)
	}
	// The error names the file, where the rest is and what it is.
	if want := path + `: line 1, column 23: more after the end of the JSON value: "{\"admin_group\": \"wheel\"}"`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q; want one with %q", err, want)
	}
}
