package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/offload/agent"
)

func TestFlagsOverrideTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(path, []byte(`{"unit": "named", "uniform_answers": true, "max_rules": 50, "zone_poll": "100ms", "hysteresis": 0.25}`), 0o644)
	cfg, _, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError),
		[]string{"-config", path, "-max-rules", "70", "-port", "5353", "-window", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	want := agent.DefaultConfig()
	want.Unit, want.UniformAnswers, want.MaxRules, want.ZonePoll, want.Hysteresis = "named", true, 70, agent.Duration(100*time.Millisecond), 0.25
	want.Port, want.Window = 5353, agent.Duration(2*time.Second)
	if cfg.Unit != want.Unit || !cfg.UniformAnswers || cfg.MaxRules != 70 || cfg.ZonePoll != want.ZonePoll ||
		cfg.Hysteresis != 0.25 || cfg.Port != 5353 || cfg.Window != want.Window || cfg.Sweep != want.Sweep {
		t.Fatalf("config %+v; want %+v", cfg, want)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "u.json")
	os.WriteFile(unknown, []byte(`{"max_rule": 5}`), 0o644)
	for _, args := range [][]string{{"-port", "70000"}, {"-window", "soon"}, {"-config", unknown}, {"extra"}, {"-uniform-answers=maybe"}} {
		if _, _, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func TestUniformAnswersIsABoolFlag(t *testing.T) {
	cfg, _, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), []string{"-uniform-answers", "-pid", "7"})
	if err != nil || !cfg.UniformAnswers || cfg.PID != 7 {
		t.Fatalf("%+v, %v", cfg, err)
	}
}
