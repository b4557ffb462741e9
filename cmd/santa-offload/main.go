// Command santa-offload offloads an unmodified server's hot requests into
// the kernel through santad. Its one subcommand, dns, runs next to an
// authoritative DNS server (docs/offload-dns.md):
//
//	santa-offload dns -unit named -uniform-answers
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
	"os"
	"os/signal"
	"reflect"
	"strconv"
	"strings"
	"syscall"

	"github.com/santa-offload/santa/internal/offload/agent"
	"github.com/santa-offload/santa/internal/version"
)

// usages describe the configuration keys as flags.
var usages = map[string]string{
	"pid":               "a `pid` of the server: the server is the processes of its cgroup",
	"unit":              "the server's systemd `unit` (named: named.service); the server is its cgroup",
	"cgroup":            "the server's cgroup v2 `path` under the hierarchy's root",
	"port":              "the DNS `port`",
	"netns":             "the network namespace `path` the server and santad are in (default: the agent's)",
	"uniform_answers":   "state that the server answers every client alike: no views, GeoIP or client-subnet answers (required)",
	"socket":            "santad's socket `path`",
	"max_rules":         "query forms offloaded per address the server listens on",
	"max_bytes":         "pattern and reply `bytes` offloaded per address (0: no bound)",
	"hot_max":           "most passed query forms read per socket each window",
	"hysteresis":        "how much more a newcomer's rate must be to displace an offloaded form (0.5: 50 %)",
	"window":            "how often the hot set is read and the top forms chosen",
	"scan":              "how often the server's sockets are looked for",
	"zone_poll":         "how often each zone's SOA serial is asked",
	"recheck_budget":    "how long re-asking a changed zone's forms may take; those not re-checked are deleted",
	"sweep":             "time in which every offloaded form is re-checked",
	"probe_timeout":     "how long one ask waits for the server",
	"probe_concurrency": "asks in flight at most",
	"asks":              "identical replies a form needs",
	"skip_retry":        "how long a skipped form is not tried again",
	"metrics":           "serve Prometheus metrics at http://`addr`/metrics",
	"log_every":         "how often a summary line is logged (0: never)",
}

func main() {
	version.Handle("santa-offload", os.Args[1:])
	if len(os.Args) < 2 || os.Args[1] != "dns" {
		fmt.Fprintln(os.Stderr, "usage: santa-offload dns [-config FILE] [flags]  (santa-offload dns -h lists the flags)")
		os.Exit(2)
	}
	cfg, debug, err := parseFlags(flag.NewFlagSet("santa-offload dns", flag.ContinueOnError), os.Args[2:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "santa-offload dns: %v\n", err)
		os.Exit(2)
	}
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "santa-offload dns: %v\n", err)
		os.Exit(1)
	}
}

// parseFlags reads the configuration file, if any, and the flags over it.
// Every key of agent.Config is a flag of the same name, '_' written '-'.
func parseFlags(fs *flag.FlagSet, args []string) (agent.Config, bool, error) {
	configPath := fs.String("config", "", "JSON configuration `file` (keys: the flags' names with '_' for '-')")
	debug := fs.Bool("debug", false, "log more")
	flags := agent.DefaultConfig()
	fields := map[string]int{} // flag name to field index
	v := reflect.ValueOf(&flags).Elem()
	for i := range v.NumField() {
		key := strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0]
		if key == "" || key == "-" {
			continue
		}
		name := strings.ReplaceAll(key, "_", "-")
		fields[name] = i
		fs.Var(fieldValue{v.Field(i)}, name, usages[key])
	}
	if err := fs.Parse(args); err != nil {
		return agent.Config{}, false, err
	}
	if fs.NArg() > 0 {
		return agent.Config{}, false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := agent.DefaultConfig()
	if *configPath != "" {
		var err error
		if cfg, err = agent.LoadConfig(*configPath); err != nil {
			return cfg, false, err
		}
	}
	c := reflect.ValueOf(&cfg).Elem()
	fs.Visit(func(f *flag.Flag) {
		if i, ok := fields[f.Name]; ok {
			c.Field(i).Set(v.Field(i))
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
	if d, ok := f.v.Addr().Interface().(*agent.Duration); ok {
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
		f.v.SetFloat(x)
	default:
		return fmt.Errorf("no flag for a %v", f.v.Type())
	}
	return nil
}
