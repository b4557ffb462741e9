package agent

import (
	"testing"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/offload/config/configtest"
)

// deploy/offload-dns.json holds every key with its default, as
// docs/offload-dns.md says.
func TestDeployedConfigIsTheDefault(t *testing.T) {
	const path = "../../../deploy/offload-dns.json"
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	configtest.DeployedIsDefault(t, path, "../../../docs/offload-dns.md", got, DefaultConfig())
}

func TestValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.UniformAnswers = true
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*Config){
		"no statement":         func(c *Config) { c.UniformAnswers = false },
		"port 0":               func(c *Config) { c.Port = 0 },
		"one ask":              func(c *Config) { c.Asks = 1 },
		"no rules":             func(c *Config) { c.MaxRules = 0 },
		"negative bytes":       func(c *Config) { c.MaxBytes = -1 },
		"zero window":          func(c *Config) { c.Window = 0 },
		"negative poll":        func(c *Config) { c.ZonePoll = -1 },
		"asks over budget":     func(c *Config) { c.ProbeTimeout = c.RecheckBudget/2 + 1 },
		"no concurrency":       func(c *Config) { c.ProbeConcurrency = 0 },
		"negative hysteresis":  func(c *Config) { c.Hysteresis = -0.1 },
		"no hot":               func(c *Config) { c.HotMax = 0 },
		"negative counts":      func(c *Config) { c.SettledCounts = -1 },
		"counts over santad's": func(c *Config) { c.SettledCounts = model.MaxLearnCounts + 1 },
	} {
		c := ok
		change(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
