// Command santad is Santa's daemon: it loads the data plane, attaches it to
// the network interfaces and installs the rules applications send over its
// Unix socket (docs/protocol.md). It runs in the foreground:
//
//	santad [-config FILE] [-socket PATH] [-interfaces lo,eth0] [-metrics-addr :9477] ...
//	santad --version
//
// Settings come from the JSON file given by -config (docs/operations.md
// names every key), then from the flags, which override the file. SIGHUP
// reads both again and applies the quotas and admin_group. SIGINT or
// SIGTERM stop santad; the data plane keeps answering, and the next santad
// takes it over with every rule.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/santa-offload/santa/internal/daemon"
	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/version"
)

// overrides are the flags that override a configuration key, by flag name.
var overrides = []struct {
	name, usage string
	set         func(*daemon.Config, string)
}{
	{"socket", "Unix socket `path` clients connect to", func(c *daemon.Config, v string) { c.Socket = v }},
	{"socket-mode", "the socket's permission bits, in `octal`", func(c *daemon.Config, v string) { c.SocketMode = v }},
	{"socket-group", "`group` (name or number) owning the socket", func(c *daemon.Config, v string) { c.SocketGroup = v }},
	{"interfaces", "comma-separated `interfaces` to attach to (default: every interface that is up)",
		func(c *daemon.Config, v string) { c.Interfaces = splitList(v) }},
	{"state-dir", "`directory` of the journal", func(c *daemon.Config, v string) { c.StateDir = v }},
	{"pin-path", "bpffs `directory` of the data plane's pins", func(c *daemon.Config, v string) { c.PinPath = v }},
	{"cgroup-path", "cgroup v2 `hierarchy` whose sockets are watched and served", func(c *daemon.Config, v string) { c.CgroupPath = v }},
	{"metrics-addr", "serve Prometheus metrics at http://`addr`/metrics", func(c *daemon.Config, v string) { c.MetricsAddr = v }},
}

// config is santad's configuration and how much it logs.
type config struct {
	daemon daemon.Config
	debug  bool
}

func main() {
	version.Handle("santad", os.Args[1:])
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "santad: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := daemon.Reload{Requests: hup, Load: func() (daemon.Config, error) {
		cfg, err := parseFlags(flag.NewFlagSet("santad", flag.ContinueOnError), os.Args[1:])
		return cfg.daemon, err
	}}
	if err := run(ctx, cfg, reload); err != nil {
		fmt.Fprintf(os.Stderr, "santad: %v\n", err)
		os.Exit(1)
	}
}

// parseFlags reads the configuration file, if any, and the flags over it.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	configPath := fs.String("config", "", "JSON configuration `file`")
	debug := fs.Bool("debug", false, "log every client's connection")
	for _, o := range overrides {
		fs.String(o.name, "", o.usage)
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := config{daemon: daemon.DefaultConfig(), debug: *debug}
	if *configPath != "" {
		var err error
		if cfg.daemon, err = daemon.LoadConfig(*configPath); err != nil {
			return cfg, err
		}
	}
	fs.Visit(func(f *flag.Flag) {
		for _, o := range overrides {
			if o.name == f.Name {
				o.set(&cfg.daemon, f.Value.String())
			}
		}
	})
	return cfg, nil
}

func run(ctx context.Context, cfg config, reload daemon.Reload) error {
	level := slog.LevelInfo
	if cfg.debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := datapath.RequireCapabilities(); err != nil {
		return err
	}
	return daemon.Run(ctx, cfg.daemon, openDatapath(cfg.daemon, log), log, reload)
}

// openDatapath opens the data plane with the configuration's settings.
func openDatapath(cfg daemon.Config, log *slog.Logger) daemon.OpenPlane {
	return func(keepLinks bool) (daemon.Plane, error) {
		dp, err := datapath.Open(datapath.Options{PinPath: cfg.PinPath, CgroupPath: cfg.CgroupPath, MaxRules: cfg.MaxRules,
			MaxServices: cfg.MaxServices, ReplyTTL: cfg.ReplyTTL, KeepLinks: keepLinks, Log: log})
		if err != nil {
			return nil, err // not a nil *Datapath in a non-nil Plane
		}
		return dp, nil
	}
}

func splitList(s string) []string {
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}
