package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// santad's configuration, like the agents', is read up to the end of its
// first JSON value: what follows (a second object pasted in, a stray
// brace) is silently ignored instead of refused.
func TestLoadConfigRefusesTrailingData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "santad.json")
	os.WriteFile(path, []byte(`{"max_services": 100} {"admin_group": "wheel"}`), 0o644)
	if cfg, err := LoadConfig(path); err == nil {
		t.Errorf("a file with a second object accepted (admin_group %q)", cfg.AdminGroup)
	}
}
