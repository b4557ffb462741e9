package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/offload/config"
	"github.com/santa-offload/santa/internal/offload/probe"
)

// Config is the agent's configuration: a JSON file whose keys are these
// tags, then flags of the same names (docs/offload-dns.md names each).
type Config struct {
	// The server, and its DNS port.
	config.Server
	Port uint16 `json:"port"`
	// UniformAnswers is the operator's statement that the server gives
	// every client the same answer to the same query. Required.
	UniformAnswers bool `json:"uniform_answers"`
	// TrustedLocalBinds is the operator's statement that no untrusted
	// local user can bind ports in the server's network namespace.
	// Required if Port is not privileged there (checkLocalBinds).
	TrustedLocalBinds bool `json:"trusted_local_binds"`
	// The hot set (query forms, per address the server listens on), asking
	// the server, reporting.
	config.Offload
	// ZonePoll is how often each zone's SOA serial is asked.
	ZonePoll Duration `json:"zone_poll"`
	// MaxZones bounds the zones followed, each asked its serial every
	// ZonePoll: the forms of more are not offloaded.
	MaxZones int `json:"max_zones"`
	// RecheckBudget bounds re-asking a changed zone's forms: those not
	// re-checked by then are deleted.
	RecheckBudget Duration `json:"recheck_budget"`
	// ChangeSettle is how long after a zone's new serial is seen its forms
	// are re-asked: a server that reloads by starting new processes (NSD)
	// answers from the old ones too for a moment after the new ones
	// answer the new serial.
	ChangeSettle Duration `json:"change_settle"`
	// Sweep is the time in which every offloaded form is re-checked.
	Sweep Duration `json:"sweep"`
	// Asks is how many identical replies a form needs (at least 2).
	Asks int `json:"asks"`
	// SettledCounts is the passed queries a CPU counts a window, asked of
	// santad while a group's top set is settled (settle.go); 0: never
	// fewer than santad's most.
	SettledCounts int `json:"settled_counts"`

	// Dial connects to santad (default: the client at Socket); Log logs
	// (default: nothing). For tests and embedders.
	Dial func() (Santad, error) `json:"-"`
	Log  *slog.Logger           `json:"-"`
}

// DefaultConfig is the configuration without a file or flags.
func DefaultConfig() Config {
	c := Config{
		Port:          53,
		Offload:       config.DefaultOffload(client.DefaultPath()),
		ZonePoll:      Duration(200 * time.Millisecond),
		MaxZones:      500,
		RecheckBudget: Duration(250 * time.Millisecond),
		ChangeSettle:  Duration(100 * time.Millisecond),
		Sweep:         Duration(30 * time.Second),
		Asks:          2,
		SettledCounts: 12500,
	}
	// The agent learns at most the forms it reads a window: with 2000,
	// 100,000 forms take 50 windows at least. Once the set is full,
	// reading 2000 a window kept it less well than 20,000 at 1M names
	// (~9 % fewer replies), which cost 1.7 % of the server's core there
	// (docs/benchmarks.md (h)). A zone of fewer names has smaller sets.
	c.HotMax = 20000
	return c
}

// ErrNotUniform is the refusal to start without UniformAnswers.
var ErrNotUniform = errors.New("refusing to start: the operator has not stated that the server answers every client alike " +
	"(uniform_answers, -uniform-answers). The kernel gives every client the answer the agent got from the server: a server " +
	"with views, GeoIP, answers that depend on the client's address or on EDNS Client Subnet would have one client's answer " +
	"served to all; and the agent asks from this host, so a query ACL (BIND's allow-query or allow-query-on, Knot's " +
	"queryacl module) that refuses some clients would have the answers it gives this host served to those clients too. " +
	"State it only if none of that is configured")

// ErrUnprivilegedPort is the refusal to start on a port any local user
// may bind, without TrustedLocalBinds.
var ErrUnprivilegedPort = errors.New("refusing to start: any local user may bind the DNS port")

// checkLocalBinds refuses a port that any local user may bind in the
// server's network namespace (unprivilegedStart reads its
// net.ipv4.ip_unprivileged_port_start), unless the operator trusts every
// process that can: such a process may bind the port beside the server
// (on loopback, or at the server's own address with SO_REUSEADDR, which
// BIND sets), however the server is named, and receive the agent's asks
// to the server's address; its answers would be installed and given by
// the kernel to every client. Binding a privileged port takes
// CAP_NET_BIND_SERVICE.
func (c Config) checkLocalBinds(unprivilegedStart func(netns string) (int, error)) error {
	if c.TrustedLocalBinds {
		return nil
	}
	start, err := unprivilegedStart(c.Netns)
	if err != nil {
		return fmt.Errorf("reading which ports are privileged in the server's network namespace: %w", err)
	}
	if int(c.Port) < start {
		return nil
	}
	return fmt.Errorf("%w: port %d is not below net.ipv4.ip_unprivileged_port_start (%d) in the server's network "+
		"namespace. A local user could bind it beside the server (on 127.0.0.1, or at the server's own address with "+
		"SO_REUSEADDR), receive the queries the agent asks the server and answer them, and the kernel would give "+
		"those answers to every client. Make the port privileged (a server port below the sysctl, or the sysctl "+
		"raised above the port), or, if no untrusted user can bind ports in that namespace, state it "+
		"(trusted_local_binds, -trusted-local-binds)", ErrUnprivilegedPort, c.Port, start)
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if !c.UniformAnswers {
		return ErrNotUniform
	}
	if err := c.Offload.Validate(probe.MaxConcurrency); err != nil {
		return err
	}
	err := config.Positive(map[string]Duration{"zone_poll": c.ZonePoll, "recheck_budget": c.RecheckBudget, "sweep": c.Sweep})
	switch {
	case err != nil:
		return err
	case c.Port == 0:
		return errors.New("port is 0")
	case c.MaxZones < 1:
		return fmt.Errorf("max_zones is %d; it must be at least 1", c.MaxZones)
	case c.ChangeSettle < 0:
		return fmt.Errorf("change_settle is %v; it must not be negative", time.Duration(c.ChangeSettle))
	case c.SettledCounts < 0 || c.SettledCounts > model.MaxLearnCounts:
		return fmt.Errorf("settled_counts is %d; it must be 0 to %d", c.SettledCounts, model.MaxLearnCounts)
	case c.Asks < 2:
		return fmt.Errorf("asks is %d; a reply must be seen at least twice", c.Asks)
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
