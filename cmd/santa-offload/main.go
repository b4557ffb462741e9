// Command santa-offload offloads an unmodified server's hot requests into
// the kernel through santad. Its subcommands: dns runs next to an
// authoritative DNS server (docs/offload-dns.md), memcached next to
// memcached (docs/offload-memcached.md):
//
//	santa-offload dns -unit named -uniform-answers
//	santa-offload memcached -unit memcached -udp-port 11211
//
// Settings come from the JSON file given by -config, then from flags of
// the same names (max_rules is -max-rules), which override the file. It
// runs in the foreground and logs to stderr; SIGINT or SIGTERM detach its
// services, which ends the offload (nobody would keep the rules fresh).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/santa-offload/santa/internal/offload/agent"
	"github.com/santa-offload/santa/internal/offload/config"
	"github.com/santa-offload/santa/internal/offload/mcagent"
	"github.com/santa-offload/santa/internal/version"
)

// dnsUsages describe the DNS agent's configuration keys as flags.
var dnsUsages = map[string]string{
	"pid":                 "a `pid` of the server: the server is the processes of its cgroup",
	"unit":                "the server's systemd `unit` (named: named.service); the server is its cgroup",
	"cgroup":              "the server's cgroup v2 `path` under the hierarchy's root",
	"port":                "the DNS `port`",
	"netns":               "the network namespace `path` the server and santad are in (default: the agent's)",
	"uniform_answers":     "state that the server answers every client alike: no views, GeoIP, client-subnet answers or query ACLs (required)",
	"trusted_local_binds": "state that no untrusted local user can bind ports in the server's network namespace (required if the port is unprivileged there)",
	"socket":              "santad's socket `path`",
	"max_rules":           "query forms offloaded per address the server listens on",
	"max_bytes":           "pattern and reply `bytes` offloaded per address (0: no bound)",
	"hot_max":             "most passed query forms read per socket each window",
	"hysteresis":          "how much more a newcomer's rate must be to displace an offloaded form (0.5: 50 %)",
	"window":              "how often the hot set is read and the top forms chosen",
	"scan":                "how often the server's sockets are looked for",
	"zone_poll":           "how often each zone's SOA serial is asked",
	"max_zones":           "zones followed at most (each asked its serial every zone_poll); forms of more are not offloaded",
	"recheck_budget":      "how long re-asking a changed zone's forms may take; those not re-checked are deleted",
	"change_settle":       "how long after a zone's new serial is seen its forms are re-asked (the server's old processes may still answer)",
	"sweep":               "time in which every offloaded form is re-checked",
	"probe_timeout":       "how long one ask waits for the server",
	"probe_concurrency":   "asks in flight at most",
	"asks":                "identical replies a form needs",
	"settled_counts":      "passed queries a CPU counts a window once the top set is settled (0: santad's most, always)",
	"skip_retry":          "how long a skipped form is not tried again",
	"metrics":             "serve Prometheus metrics at http://`addr`/metrics",
	"log_every":           "how often a summary line is logged (0: never)",
}

// mcUsages describe the memcached agent's configuration keys as flags.
var mcUsages = map[string]string{
	"pid":               "a `pid` of memcached: memcached is the processes of its cgroup",
	"unit":              "memcached's systemd `unit` (memcached: memcached.service); memcached is its cgroup",
	"cgroup":            "memcached's cgroup v2 `path` under the hierarchy's root",
	"port":              "memcached's TCP `port` (its -p)",
	"udp_port":          "memcached's UDP `port` (its -U; 0: the TCP port)",
	"netns":             "the network namespace `path` memcached and santad are in (default: the agent's)",
	"socket":            "santad's socket `path`",
	"max_rules":         "keys offloaded at most (each a rule on every UDP socket)",
	"max_bytes":         "pattern and reply `bytes` offloaded at most (0: no bound)",
	"hot_max":           "most passed requests read per UDP socket each window",
	"hysteresis":        "how much more a newcomer's rate must be to displace an offloaded key (0.5: 50 %)",
	"window":            "how often the hot set is read, the top keys chosen and dead rules read again",
	"scan":              "how often memcached's sockets are looked for",
	"max_age":           "how long an offloaded key goes without its item being read again",
	"expiry_margin":     "taken off an item's time to live for its rule's deadline",
	"watch":             "how often offloaded keys' generations are checked, to read written ones again at once (0: never)",
	"watch_rate":        "generation checks a second at most",
	"probe_timeout":     "how long one ask of memcached waits",
	"probe_concurrency": "UDP gets in flight at most",
	"skip_retry":        "how long a key that cannot be offloaded is not tried again",
	"metrics":           "serve Prometheus metrics at http://`addr`/metrics",
	"log_every":         "how often a summary line is logged (0: never)",
}

// command is a subcommand: its flags and configuration, and the agent it
// runs.
type command struct {
	name string
	run  func(ctx context.Context, args []string, log func(debug bool) *slog.Logger) error
}

var commands = []command{
	{"dns", func(ctx context.Context, args []string, log func(bool) *slog.Logger) error {
		cfg, debug, err := parseFlags(flag.NewFlagSet("santa-offload dns", flag.ContinueOnError), args,
			agent.DefaultConfig, agent.LoadConfig, dnsUsages)
		if err != nil {
			return err
		}
		cfg.Log = log(debug)
		return agent.Run(ctx, cfg)
	}},
	{"memcached", func(ctx context.Context, args []string, log func(bool) *slog.Logger) error {
		cfg, debug, err := parseFlags(flag.NewFlagSet("santa-offload memcached", flag.ContinueOnError), args,
			mcagent.DefaultConfig, mcagent.LoadConfig, mcUsages)
		if err != nil {
			return err
		}
		cfg.Log = log(debug)
		return mcagent.Run(ctx, cfg)
	}},
}

func main() {
	version.Handle("santa-offload", os.Args[1:])
	var cmd *command
	for i := range commands {
		if len(os.Args) >= 2 && os.Args[1] == commands[i].name {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintln(os.Stderr, "usage: santa-offload dns|memcached [-config FILE] [flags]  (santa-offload dns -h lists the flags)")
		os.Exit(2)
	}
	setGCPercent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := func(debug bool) *slog.Logger {
		level := slog.LevelInfo
		if debug {
			level = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	err := cmd.run(ctx, os.Args[2:], log)
	var usage *flagError
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, &usage):
		fmt.Fprintf(os.Stderr, "santa-offload %s: %v\n", cmd.name, err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "santa-offload %s: %v\n", cmd.name, err)
		os.Exit(1)
	}
}

// gcPercent is the agents' GOGC. Their heap is mostly long-lived forms
// (about 50 MB at 100,000 DNS forms), their garbage each window's
// reading of the hot set and the sweep's asks: at Go's default of 100 the
// collector ran every 2-3 s, and its workers, which also mark whenever the
// agent is idle, took from the server core the CPU the server and
// Santa's answers would have had (docs/benchmarks.md (h)). At 400 it runs
// a quarter as often, for a heap up to five times the live one.
const gcPercent = 400

// setGCPercent sets gcPercent unless GOGC says otherwise: an operator's
// GOGC (e.g. GOGC=100 for less memory) wins.
func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

// flagError is an error of the command line or the configuration file.
type flagError struct{ err error }

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// parseFlags reads the configuration file, if any, and the flags over it.
// Every key of the configuration C is a flag of the same name, '_' written
// '-'. Its errors but -h are flagErrors.
func parseFlags[C any](fs *flag.FlagSet, args []string, defaults func() C, load func(string) (C, error),
	usages map[string]string) (_ C, _ bool, err error) {
	defer func() {
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			err = &flagError{err}
		}
	}()
	var zero C
	configPath := fs.String("config", "", "JSON configuration `file` (keys: the flags' names with '_' for '-')")
	debug := fs.Bool("debug", false, "log more")
	flags := defaults()
	fields := map[string][]int{} // flag name to field index
	v := reflect.ValueOf(&flags).Elem()
	for _, f := range reflect.VisibleFields(v.Type()) { // those of embedded structs too
		key := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Anonymous || key == "" || key == "-" {
			continue
		}
		name := strings.ReplaceAll(key, "_", "-")
		fields[name] = f.Index
		fs.Var(fieldValue{v.FieldByIndex(f.Index)}, name, usages[key])
	}
	if err := fs.Parse(args); err != nil {
		return zero, false, err
	}
	if fs.NArg() > 0 {
		return zero, false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := defaults()
	if *configPath != "" {
		var err error
		if cfg, err = load(*configPath); err != nil {
			return cfg, false, err
		}
	}
	c := reflect.ValueOf(&cfg).Elem()
	fs.Visit(func(f *flag.Flag) {
		if i, ok := fields[f.Name]; ok {
			c.FieldByIndex(i).Set(v.FieldByIndex(i))
		}
	})
	return cfg, *debug, nil
}

// fieldValue is a configuration field as a flag.Value.
type fieldValue struct{ v reflect.Value }

func (f fieldValue) String() string {
	if !f.v.IsValid() {
		return ""
	}
	return fmt.Sprint(f.v.Interface())
}

func (f fieldValue) IsBoolFlag() bool { return f.v.IsValid() && f.v.Kind() == reflect.Bool }

func (f fieldValue) Set(s string) error {
	if d, ok := f.v.Addr().Interface().(*config.Duration); ok {
		return d.Set(s)
	}
	switch f.v.Kind() {
	case reflect.String:
		f.v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.v.SetBool(b)
	case reflect.Int:
		n, err := strconv.ParseInt(s, 10, 0)
		if err != nil {
			return err
		}
		f.v.SetInt(n)
	case reflect.Uint16:
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return err
		}
		f.v.SetUint(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		// ParseFloat takes "NaN" and "Inf", which every range check
		// (NaN < 0 is false) would let through.
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%s is not a finite number", s)
		}
		f.v.SetFloat(x)
	default:
		return fmt.Errorf("no flag for a %v", f.v.Type())
	}
	return nil
}
