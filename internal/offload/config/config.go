// Package config is what the offload agents' configurations share: the
// JSON file read over the defaults, refusing unknown keys, and durations
// written as in Go ("250ms") in files and flags.
package config

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/santa-offload/santa/internal/jsonfile"
)

// Load reads the JSON file at path into c, which holds the defaults: keys
// the file has override them. Unknown keys are refused: a misspelt key
// must not silently do nothing; so is anything after the JSON object (a
// second object pasted in, a stray brace), which would be ignored.
func Load(path string, c any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := jsonfile.Decode(b, c); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Duration is a time.Duration written as in Go ("250ms") in JSON and
// flags.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// Set parses s (flag.Value).
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"250ms\": %w", err)
	}
	return d.Set(s)
}

// Positive checks that each named duration is positive.
func Positive(ds map[string]Duration) error {
	for name, d := range ds {
		if d <= 0 {
			return fmt.Errorf("%s is %v; it must be positive", name, time.Duration(d))
		}
	}
	return nil
}

// Server names the server an agent offloads. At most one of PID, Unit and
// Cgroup is set (none: whatever holds a socket bound to its ports).
type Server struct {
	// PID is a process of the server: the server is the processes of its
	// cgroup v2, so that a restart under a new pid is followed.
	PID int `json:"pid"`
	// Unit is the server's systemd unit; Cgroup its cgroup v2 path.
	Unit   string `json:"unit"`
	Cgroup string `json:"cgroup"`
	// Netns is the network namespace the server and santad are in ("":
	// the agent's).
	Netns string `json:"netns"`
}

// Offload is what the agents share of how they offload: santad, the top
// set's bounds and how it is chosen, asking the server, and reporting.
type Offload struct {
	// Socket is santad's socket.
	Socket string `json:"socket"`
	// MaxRules and MaxBytes bound what is offloaded (each request form is
	// a rule on every socket the server answers it on) and its pattern and
	// reply bytes (0: no bound).
	MaxRules int `json:"max_rules"`
	MaxBytes int `json:"max_bytes"`
	// HotMax is how many of a socket's most passed requests are read each
	// window.
	HotMax int `json:"hot_max"`
	// Hysteresis: an offloaded request stays unless a newcomer's rate
	// beats its own by this factor (0.5: 50 % more).
	Hysteresis float64 `json:"hysteresis"`
	// Window is how often the hot set is read and the top requests chosen.
	Window Duration `json:"window"`
	// Scan is how often the server's sockets are looked for.
	Scan Duration `json:"scan"`
	// ProbeTimeout is how long one ask waits for the server's reply.
	ProbeTimeout Duration `json:"probe_timeout"`
	// ProbeConcurrency bounds the asks in flight.
	ProbeConcurrency int `json:"probe_concurrency"`
	// SkipRetry is how long a request that cannot be offloaded is not
	// tried again.
	SkipRetry Duration `json:"skip_retry"`
	// Metrics, if set, serves Prometheus metrics at http://ADDR/metrics.
	Metrics string `json:"metrics"`
	// LogEvery is how often a summary line is logged (0: never).
	LogEvery Duration `json:"log_every"`
}

// DefaultOffload is Offload's defaults, santad's socket being socket.
func DefaultOffload(socket string) Offload {
	return Offload{
		Socket:           socket,
		MaxRules:         10000,
		HotMax:           2000,
		Hysteresis:       0.5,
		Window:           Duration(time.Second),
		Scan:             Duration(250 * time.Millisecond),
		ProbeTimeout:     Duration(50 * time.Millisecond),
		ProbeConcurrency: 64,
		SkipRetry:        Duration(time.Minute),
		LogEvery:         Duration(10 * time.Second),
	}
}

// Validate checks o, whose asks in flight are at most maxConcurrency.
func (o Offload) Validate(maxConcurrency int) error {
	err := Positive(map[string]Duration{"window": o.Window, "scan": o.Scan, "probe_timeout": o.ProbeTimeout,
		"skip_retry": o.SkipRetry})
	switch {
	case err != nil:
		return err
	case o.MaxRules < 1:
		return fmt.Errorf("max_rules is %d; it must be at least 1", o.MaxRules)
	case o.MaxBytes < 0:
		return fmt.Errorf("max_bytes is %d", o.MaxBytes)
	case o.HotMax < 1:
		return fmt.Errorf("hot_max is %d; it must be at least 1", o.HotMax)
	case !(o.Hysteresis >= 0) || math.IsInf(o.Hysteresis, 1):
		// Not o.Hysteresis < 0: NaN compares false with everything, and
		// would make every comparison of rates with it false.
		return fmt.Errorf("hysteresis is %v; it must be a finite number, 0 or more", o.Hysteresis)
	case o.ProbeConcurrency < 1 || o.ProbeConcurrency > maxConcurrency:
		return fmt.Errorf("probe_concurrency is %d; it must be in 1..%d", o.ProbeConcurrency, maxConcurrency)
	}
	return nil
}
