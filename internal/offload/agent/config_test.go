package agent

import (
	"errors"
	"fmt"
	"strings"
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

// TestCheckLocalBinds: a port any local user may bind in the server's
// namespace is refused, saying why and how to go on, unless the operator
// trusts local binds.
func TestCheckLocalBinds(t *testing.T) {
	for _, tt := range []struct {
		port    uint16
		start   int
		trusted bool
		refused bool
	}{
		{53, 1024, false, false},
		{1023, 1024, false, false},
		{1024, 1024, false, true},
		{5353, 1024, false, true},
		{53, 0, false, true}, // a container runtime's namespace, say
		{5353, 1024, true, false},
		{53, 0, true, false},
	} {
		c := DefaultConfig()
		c.Port, c.TrustedLocalBinds, c.Netns = tt.port, tt.trusted, "/run/netns/dns"
		err := c.checkLocalBinds(func(ns string) (int, error) {
			if ns != c.Netns {
				t.Errorf("read the namespace %q, not the server's %q", ns, c.Netns)
			}
			return tt.start, nil
		})
		switch {
		case !tt.refused && err != nil:
			t.Errorf("port %d, start %d, trusted %v: %v", tt.port, tt.start, tt.trusted, err)
		case tt.refused && !errors.Is(err, ErrUnprivilegedPort):
			t.Errorf("port %d, start %d: %v; want ErrUnprivilegedPort", tt.port, tt.start, err)
		case tt.refused:
			for _, want := range []string{fmt.Sprintf("port %d ", tt.port), fmt.Sprintf("ip_unprivileged_port_start (%d)", tt.start),
				"SO_REUSEADDR", "every client", "-trusted-local-binds"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("port %d, start %d: %q does not say %q", tt.port, tt.start, err, want)
				}
			}
		}
	}
	// A sysctl that cannot be read refuses too.
	c := DefaultConfig()
	if err := c.checkLocalBinds(func(string) (int, error) { return 0, errors.New("no /proc") }); err == nil {
		t.Error("accepted without knowing which ports are privileged")
	}
}
