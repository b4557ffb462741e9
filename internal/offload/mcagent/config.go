package mcagent

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/config"
	"github.com/santa-offload/santa/internal/offload/probe"
)

// Config is the agent's configuration: a JSON file whose keys are these
// tags, then flags of the same names (docs/offload-memcached.md names
// each).
type Config struct {
	// memcached: at most one of PID, Unit and Cgroup (none: whatever is
	// bound to its ports), its TCP port (-p) and UDP port (-U; 0: the TCP
	// port), and the network namespace it and santad are in ("": the
	// agent's).
	PID     int    `json:"pid"`
	Unit    string `json:"unit"`
	Cgroup  string `json:"cgroup"`
	Port    uint16 `json:"port"`
	UDPPort uint16 `json:"udp_port"`
	Netns   string `json:"netns"`
	// Socket is santad's socket.
	Socket string `json:"socket"`
	// MaxRules and MaxBytes bound the keys offloaded (each is a rule on
	// every UDP socket of memcached's) and their pattern and reply bytes
	// (0: no bound).
	MaxRules int `json:"max_rules"`
	MaxBytes int `json:"max_bytes"`
	// HotMax is how many of a socket's most passed requests are read each
	// window.
	HotMax int `json:"hot_max"`
	// Hysteresis: an offloaded key stays unless a newcomer's rate beats
	// its own by this factor (0.5: 50 % more).
	Hysteresis float64 `json:"hysteresis"`
	// Window is how often the hot set is read, the top keys chosen and
	// rules whose guard died read again.
	Window config.Duration `json:"window"`
	// Scan is how often memcached's sockets are looked for.
	Scan config.Duration `json:"scan"`
	// MaxAge is how long an offloaded key goes without being read again
	// from memcached: it bounds how long the kernel answers a value
	// memcached evicted for room (no write, so no invalidation).
	MaxAge config.Duration `json:"max_age"`
	// ExpiryMargin is taken off an item's time to live for its rule's
	// deadline: it covers santad's time to apply the rule. An install
	// that took longer is undone.
	ExpiryMargin config.Duration `json:"expiry_margin"`
	// ProbeTimeout is how long one ask (UDP get, TCP mg batch) waits.
	ProbeTimeout config.Duration `json:"probe_timeout"`
	// ProbeConcurrency bounds the UDP gets in flight.
	ProbeConcurrency int `json:"probe_concurrency"`
	// SkipRetry is how long a key that cannot be offloaded (not a plain
	// get, too large) is not tried again; keys skipped for a passing
	// reason (a miss, a write in flight) are tried again next window.
	SkipRetry config.Duration `json:"skip_retry"`
	// Metrics, if set, serves Prometheus metrics at http://ADDR/metrics.
	Metrics string `json:"metrics"`
	// LogEvery is how often a summary line is logged (0: never).
	LogEvery config.Duration `json:"log_every"`

	// Dial connects to santad (default: the client at Socket); Log logs
	// (default: nothing). For tests and embedders.
	Dial func() (Santad, error) `json:"-"`
	Log  *slog.Logger           `json:"-"`
}

// DefaultConfig is the configuration without a file or flags.
func DefaultConfig() Config {
	return Config{
		Port:             11211,
		Socket:           client.DefaultSocket,
		MaxRules:         10000,
		HotMax:           2000,
		Hysteresis:       0.5,
		Window:           config.Duration(time.Second),
		Scan:             config.Duration(250 * time.Millisecond),
		MaxAge:           config.Duration(30 * time.Second),
		ExpiryMargin:     config.Duration(100 * time.Millisecond),
		ProbeTimeout:     config.Duration(200 * time.Millisecond),
		ProbeConcurrency: 64,
		SkipRetry:        config.Duration(time.Minute),
		LogEvery:         config.Duration(10 * time.Second),
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	err := config.Positive(map[string]config.Duration{"window": c.Window, "scan": c.Scan, "max_age": c.MaxAge,
		"expiry_margin": c.ExpiryMargin, "probe_timeout": c.ProbeTimeout, "skip_retry": c.SkipRetry})
	switch {
	case err != nil:
		return err
	case c.Port == 0:
		return errors.New("port is 0: the agent needs memcached's TCP port (-p), which its writes come through and the agent reads items over")
	case c.MaxRules < 1:
		return fmt.Errorf("max_rules is %d; it must be at least 1", c.MaxRules)
	case c.MaxBytes < 0:
		return fmt.Errorf("max_bytes is %d", c.MaxBytes)
	case c.HotMax < 1:
		return fmt.Errorf("hot_max is %d; it must be at least 1", c.HotMax)
	case c.Hysteresis < 0:
		return fmt.Errorf("hysteresis is %v; it must not be negative", c.Hysteresis)
	case c.ProbeConcurrency < 1 || c.ProbeConcurrency > probe.MaxConcurrency:
		return fmt.Errorf("probe_concurrency is %d; it must be in 1..%d", c.ProbeConcurrency, probe.MaxConcurrency)
	case c.ExpiryMargin >= config.Duration(time.Second):
		return fmt.Errorf("expiry_margin is %v; it must be under 1s (memcached counts time to live in seconds)", c.ExpiryMargin)
	}
	return nil
}

// udpPort is memcached's UDP port.
func (c Config) udpPort() uint16 {
	if c.UDPPort == 0 {
		return c.Port
	}
	return c.UDPPort
}

// LoadConfig reads a JSON configuration file over the defaults. Unknown
// keys are refused: a misspelt key must not silently do nothing.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig()
	err := config.Load(path, &c)
	return c, err
}
