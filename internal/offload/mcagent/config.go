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
	// memcached, its TCP port (-p) and its UDP port (-U; 0: the TCP port).
	config.Server
	Port    uint16 `json:"port"`
	UDPPort uint16 `json:"udp_port"`
	// The hot set (keys: each a rule on every UDP socket of memcached's),
	// asking memcached (a UDP get, or a TCP batch of mg, waits
	// ProbeTimeout; ProbeConcurrency bounds the UDP gets), reporting. A
	// key that cannot be offloaded (not a plain get, too large) is not
	// tried again for SkipRetry; keys skipped for a passing reason (a
	// miss, a write in flight) are tried again next window.
	config.Offload
	// MaxAge is how long an offloaded key goes without being read again
	// from memcached: it bounds how long the kernel answers a value
	// memcached evicted for room (no write, so no invalidation).
	MaxAge config.Duration `json:"max_age"`
	// ExpiryMargin is taken off an item's time to live for its rule's
	// deadline: it covers santad's time to apply the rule. An install
	// that took longer is undone.
	ExpiryMargin config.Duration `json:"expiry_margin"`
	// Watch is how often the generations of offloaded keys are checked
	// (0: never; dead rules then wait for the window), at most WatchRate
	// checks a second, hottest and longest unchecked keys first: a key
	// found written is read again and its rule replaced at once.
	Watch     config.Duration `json:"watch"`
	WatchRate int             `json:"watch_rate"`

	// Dial connects to santad (default: the client at Socket); Log logs
	// (default: nothing). For tests and embedders.
	Dial func() (Santad, error) `json:"-"`
	Log  *slog.Logger           `json:"-"`
}

// DefaultConfig is the configuration without a file or flags.
func DefaultConfig() Config {
	c := Config{
		Port:         11211,
		Offload:      config.DefaultOffload(client.DefaultPath()),
		MaxAge:       config.Duration(30 * time.Second),
		ExpiryMargin: config.Duration(100 * time.Millisecond),
		Watch:        config.Duration(50 * time.Millisecond),
		WatchRate:    5000,
	}
	// A batch of mg is one ask.
	c.ProbeTimeout = config.Duration(200 * time.Millisecond)
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if err := c.Offload.Validate(probe.MaxConcurrency); err != nil {
		return err
	}
	err := config.Positive(map[string]config.Duration{"max_age": c.MaxAge, "expiry_margin": c.ExpiryMargin})
	switch {
	case err != nil:
		return err
	case c.Port == 0:
		return errors.New("port is 0: the agent needs memcached's TCP port (-p), which its writes come through and the agent reads items over")
	case c.Watch < 0:
		return fmt.Errorf("watch is %v; want a duration, or 0 (no watch)", c.Watch)
	case c.Watch > 0 && c.WatchRate < 1:
		return fmt.Errorf("watch_rate is %d; it must be at least 1 while watch is on", c.WatchRate)
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
