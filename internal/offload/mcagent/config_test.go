package mcagent

import (
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/offload/config"
	"github.com/santa-offload/santa/internal/offload/config/configtest"
)

// deploy/offload-memcached.json holds every key with its default, as
// docs/offload-memcached.md says.
func TestDeployedConfigIsTheDefault(t *testing.T) {
	const path = "../../../deploy/offload-memcached.json"
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	configtest.DeployedIsDefault(t, path, "../../../docs/offload-memcached.md", got, DefaultConfig())
}

func TestValidate(t *testing.T) {
	ok := DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*Config){
		"no TCP port":         func(c *Config) { c.Port = 0 },
		"no rules":            func(c *Config) { c.MaxRules = 0 },
		"negative bytes":      func(c *Config) { c.MaxBytes = -1 },
		"zero window":         func(c *Config) { c.Window = 0 },
		"negative max age":    func(c *Config) { c.MaxAge = -1 },
		"margin of a second":  func(c *Config) { c.ExpiryMargin = config.Duration(time.Second) },
		"no margin":           func(c *Config) { c.ExpiryMargin = 0 },
		"no concurrency":      func(c *Config) { c.ProbeConcurrency = 0 },
		"negative hysteresis": func(c *Config) { c.Hysteresis = -0.1 },
		"no hot":              func(c *Config) { c.HotMax = 0 },
		"negative watch":      func(c *Config) { c.Watch = -1 },
		"no watch rate":       func(c *Config) { c.WatchRate = 0 },
	} {
		c := ok
		change(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if c := (Config{Port: 11211}); c.udpPort() != 11211 {
		t.Errorf("udp_port 0 is %d; want the TCP port", c.udpPort())
	}
}
