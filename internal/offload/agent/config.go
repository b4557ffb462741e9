package agent

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
// tags, then flags of the same names (docs/offload-dns.md names each).
type Config struct {
	// The server: at most one of PID, Unit and Cgroup (none: whatever is
	// bound to Port), its DNS port, and the network namespace it and
	// santad are in ("": the agent's).
	PID    int    `json:"pid"`
	Unit   string `json:"unit"`
	Cgroup string `json:"cgroup"`
	Port   uint16 `json:"port"`
	Netns  string `json:"netns"`
	// UniformAnswers is the operator's statement that the server gives
	// every client the same answer to the same query. Required.
	UniformAnswers bool `json:"uniform_answers"`
	// Socket is santad's socket.
	Socket string `json:"socket"`
	// MaxRules and MaxBytes bound the query forms offloaded per address
	// the server listens on (each is a rule on every socket of that
	// address), and their pattern and reply bytes (0: no bound).
	MaxRules int `json:"max_rules"`
	MaxBytes int `json:"max_bytes"`
	// HotMax is how many of a socket's most passed query forms are read
	// each window.
	HotMax int `json:"hot_max"`
	// Hysteresis: an offloaded form stays unless a newcomer's rate beats
	// its own by this factor (0.5: 50 % more).
	Hysteresis float64 `json:"hysteresis"`
	// Window is how often the hot set is read and the top forms chosen.
	Window Duration `json:"window"`
	// Scan is how often the server's sockets are looked for.
	Scan Duration `json:"scan"`
	// ZonePoll is how often each zone's SOA serial is asked.
	ZonePoll Duration `json:"zone_poll"`
	// RecheckBudget bounds re-asking a changed zone's forms: those not
	// re-checked by then are deleted.
	RecheckBudget Duration `json:"recheck_budget"`
	// Sweep is the time in which every offloaded form is re-checked.
	Sweep Duration `json:"sweep"`
	// ProbeTimeout is how long one ask waits for the server's reply.
	ProbeTimeout Duration `json:"probe_timeout"`
	// ProbeConcurrency bounds the asks in flight.
	ProbeConcurrency int `json:"probe_concurrency"`
	// Asks is how many identical replies a form needs (at least 2).
	Asks int `json:"asks"`
	// SkipRetry is how long a form that was skipped is not tried again.
	SkipRetry Duration `json:"skip_retry"`
	// Metrics, if set, serves Prometheus metrics at http://ADDR/metrics.
	Metrics string `json:"metrics"`
	// LogEvery is how often a summary line is logged (0: never).
	LogEvery Duration `json:"log_every"`

	// Dial connects to santad (default: the client at Socket); Log logs
	// (default: nothing). For tests and embedders.
	Dial func() (Santad, error) `json:"-"`
	Log  *slog.Logger           `json:"-"`
}

// DefaultConfig is the configuration without a file or flags.
func DefaultConfig() Config {
	return Config{
		Port:             53,
		Socket:           client.DefaultSocket,
		MaxRules:         10000,
		HotMax:           2000,
		Hysteresis:       0.5,
		Window:           Duration(time.Second),
		Scan:             Duration(250 * time.Millisecond),
		ZonePoll:         Duration(200 * time.Millisecond),
		RecheckBudget:    Duration(250 * time.Millisecond),
		Sweep:            Duration(30 * time.Second),
		ProbeTimeout:     Duration(50 * time.Millisecond),
		ProbeConcurrency: 64,
		Asks:             2,
		SkipRetry:        Duration(time.Minute),
		LogEvery:         Duration(10 * time.Second),
	}
}

// ErrNotUniform is the refusal to start without UniformAnswers.
var ErrNotUniform = errors.New("refusing to start: the operator has not stated that the server answers every client alike " +
	"(uniform_answers, -uniform-answers). The kernel gives every client the answer the agent got from the server: a server " +
	"with views, GeoIP, answers that depend on the client's address or on EDNS Client Subnet would have one client's answer " +
	"served to all. State it only if none of that is configured")

// Validate checks the configuration.
func (c Config) Validate() error {
	if !c.UniformAnswers {
		return ErrNotUniform
	}
	err := config.Positive(map[string]Duration{"window": c.Window, "scan": c.Scan, "zone_poll": c.ZonePoll,
		"recheck_budget": c.RecheckBudget, "sweep": c.Sweep, "probe_timeout": c.ProbeTimeout, "skip_retry": c.SkipRetry})
	if err != nil {
		return err
	}
	switch {
	case c.Port == 0:
		return errors.New("port is 0")
	case c.MaxRules < 1:
		return fmt.Errorf("max_rules is %d; it must be at least 1", c.MaxRules)
	case c.MaxBytes < 0:
		return fmt.Errorf("max_bytes is %d", c.MaxBytes)
	case c.HotMax < 1:
		return fmt.Errorf("hot_max is %d; it must be at least 1", c.HotMax)
	case c.Hysteresis < 0:
		return fmt.Errorf("hysteresis is %v; it must not be negative", c.Hysteresis)
	case c.Asks < 2:
		return fmt.Errorf("asks is %d; a reply must be seen at least twice", c.Asks)
	case c.ProbeConcurrency < 1 || c.ProbeConcurrency > probe.MaxConcurrency:
		return fmt.Errorf("probe_concurrency is %d; it must be in 1..%d", c.ProbeConcurrency, probe.MaxConcurrency)
	case time.Duration(c.Asks)*time.Duration(c.ProbeTimeout) > time.Duration(c.RecheckBudget):
		// A re-check asks that many times in a row: a server slower than
		// that would have every form of a changed zone deleted.
		return fmt.Errorf("asks × probe_timeout (%d × %v) is over recheck_budget %v", c.Asks, time.Duration(c.ProbeTimeout), time.Duration(c.RecheckBudget))
	}
	return nil
}

// LoadConfig reads a JSON configuration file over the defaults. Unknown
// keys are refused: a misspelt key must not silently do nothing.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig()
	err := config.Load(path, &c)
	return c, err
}

// Duration is a time.Duration written as in Go ("250ms") in JSON and
// flags.
type Duration = config.Duration
