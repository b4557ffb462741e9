package main

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/offload/agent"
	"github.com/santa-offload/santa/internal/offload/config"
	"github.com/santa-offload/santa/internal/offload/mcagent"
)

func dnsFlags(args []string) (agent.Config, bool, error) {
	return parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), args, agent.DefaultConfig, agent.LoadConfig, dnsUsages)
}

func TestFlagsOverrideTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(path, []byte(`{"unit": "named", "uniform_answers": true, "max_rules": 50, "zone_poll": "100ms", "hysteresis": 0.25}`), 0o644)
	cfg, _, err := dnsFlags([]string{"-config", path, "-max-rules", "70", "-port", "5353", "-window", "2s"})
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
		if _, _, err := dnsFlags(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// The operator's statements are bool flags: given, they are made.
func TestStatementsAreBoolFlags(t *testing.T) {
	cfg, _, err := dnsFlags([]string{"-uniform-answers", "-trusted-local-binds", "-pid", "7"})
	if err != nil || !cfg.UniformAnswers || !cfg.TrustedLocalBinds || cfg.PID != 7 {
		t.Fatalf("%+v, %v", cfg, err)
	}
}

// The memcached agent's flags and file: the same machinery, its own keys.
func TestMemcachedFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.json")
	os.WriteFile(path, []byte(`{"unit": "memcached", "udp_port": 11311, "max_age": "10s"}`), 0o644)
	mc := func(args ...string) (mcagent.Config, error) {
		cfg, _, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), args, mcagent.DefaultConfig, mcagent.LoadConfig, mcUsages)
		return cfg, err
	}
	cfg, err := mc("-config", path, "-port", "11300", "-expiry-margin", "50ms")
	if err != nil {
		t.Fatal(err)
	}
	want := mcagent.DefaultConfig()
	want.Unit, want.UDPPort, want.MaxAge, want.Port, want.ExpiryMargin = "memcached", 11311, config.Duration(10*time.Second), 11300,
		config.Duration(50*time.Millisecond)
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config %+v; want %+v", cfg, want)
	}
	for _, args := range [][]string{{"-uniform-answers"}, {"-udp-port", "-1"}, {"-max-age", "1"}} {
		if _, err := mc(args...); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	// Every key has a usage.
	for _, f := range reflect.VisibleFields(reflect.TypeFor[mcagent.Config]()) {
		if key := f.Tag.Get("json"); !f.Anonymous && key != "-" && mcUsages[key] == "" {
			t.Errorf("key %q has no usage", key)
		}
	}
}

// The agents collect at gcPercent, unless GOGC is set: the operator's
// GOGC wins.
func TestGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	t.Setenv("GOGC", "") // restored after the test
	os.Unsetenv("GOGC")
	setGCPercent()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("without GOGC: %d; want %d", got, gcPercent)
	}
	t.Setenv("GOGC", "100")
	setGCPercent()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC=100: %d; want it left at 100", got)
	}
}

// Every floating-point key of either agent refuses NaN and ±Inf, as a flag
// and in Validate (an embedder's Config): every range check lets NaN
// through (NaN < 0 is false), and comparisons with it are all false.
func TestFloatKeysAreFinite(t *testing.T) {
	checkFinite(t, "dns", dnsUsages, func(args []string) (agent.Config, error) {
		c, _, err := dnsFlags(append(args, "-uniform-answers"))
		return c, err
	}, agent.Config.Validate)
	checkFinite(t, "memcached", mcUsages, func(args []string) (mcagent.Config, error) {
		c, _, err := parseFlags(flag.NewFlagSet("t", flag.ContinueOnError), args, mcagent.DefaultConfig, mcagent.LoadConfig, mcUsages)
		return c, err
	}, mcagent.Config.Validate)
}

func checkFinite[C any](t *testing.T, name string, usages map[string]string, parse func([]string) (C, error), validate func(C) error) {
	t.Helper()
	floats := 0
	for _, f := range reflect.VisibleFields(reflect.TypeFor[C]()) {
		key := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Anonymous || key == "-" || f.Type.Kind() != reflect.Float64 {
			continue
		}
		floats++
		flagName := "-" + strings.ReplaceAll(key, "_", "-")
		c, err := parse(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(c); err != nil {
			t.Fatalf("%s: the defaults: %v", name, err)
		}
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			text := strconv.FormatFloat(v, 'g', -1, 64)
			if _, err := parse([]string{flagName, text}); err == nil || !strings.Contains(err.Error(), flagName) {
				t.Errorf("%s %s %s: error %v; want one naming the flag", name, flagName, text, err)
			}
			bad := c
			reflect.ValueOf(&bad).Elem().FieldByIndex(f.Index).SetFloat(v)
			if err := validate(bad); err == nil || !strings.Contains(err.Error(), key) {
				t.Errorf("%s: %s %v: Validate says %v; want an error naming %s", name, key, v, err, key)
			}
		}
	}
	if floats == 0 {
		t.Errorf("%s: no floating-point key found; is the check still needed?", name)
	}
}
