package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Bad input must be refused with a clear error, not half read: a file
// with something after its JSON object (a second object pasted in, a
// stray brace) is read up to the first object's end and the rest is
// ignored; and -hysteresis NaN passes Validate (NaN < 0 is false), making
// every comparison of rates with it false.
func TestBadInputReview(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"second object": `{"uniform_answers": true, "port": 53} {"port": 5353, "unit": "knot"}`,
		"stray brace":   `{"uniform_answers": true, "unit": "named"}}`,
		"trailing text": `{"uniform_answers": true, "unit": "named"} max_rules=5`,
	} {
		path := filepath.Join(dir, name+".json")
		os.WriteFile(path, []byte(text), 0o644)
		if cfg, _, err := dnsFlags([]string{"-config", path}); err == nil {
			t.Errorf("%s: %q accepted (unit %q, port %d)", name, text, cfg.Unit, cfg.Port)
		}
	}
	for _, v := range []string{"NaN", "Inf", "-Inf", "+Inf", "infinity"} {
		cfg, _, err := dnsFlags([]string{"-uniform-answers", "-hysteresis", v})
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil {
			t.Errorf("-hysteresis %s accepted", v)
		}
	}
}
