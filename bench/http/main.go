// Command http is the paper's HTTP scenario (section 5.7, Figure 8) in the
// rig (bench/rig.sh): nginx from Debian's package, one worker pinned to
// the server CPU, serves one file per reply size, with and without
// sendfile; wrk, one thread pinned to the client CPU, keeps -connections
// keep-alive connections busy for -duration per run. Runs are interleaved
// over rounds; RESULT lines give medians and ranges of requests/s and of
// server-core µs per request, with both CPUs' busy shares (wrk is often
// the bottleneck on two cores).
//
// The third variant is nginx with Santa on its listening socket: one rule
// per file, wrk's exact request answered with nginx's exact reply, through
// sockmap (docs/tcp.md). Every Santa run checks that Santa answered every
// request wrk counted.
//
// Needs root and the packages nginx-light and wrk (make bench-deps).
// Everything it starts or creates is removed on exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/netproc"
)

type config struct {
	r                    rig.Rig
	sizes                []int
	rounds               int
	duration             time.Duration
	connections          int
	serverCPU, clientCPU int
}

func main() {
	var c config
	flag.StringVar(&c.r.Name, "rig", "sbhttp", "rig name (namespaces NAME-srv, NAME-cli)")
	flag.StringVar(&c.r.Script, "rig-script", "bench/rig.sh", "path of rig.sh")
	sizes := flag.String("sizes", "64,500,1000,2000,5000", "reply body sizes, bytes")
	flag.IntVar(&c.rounds, "rounds", 3, "interleaved rounds")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "wrk's time per run")
	flag.IntVar(&c.connections, "connections", 64, "wrk's keep-alive connections")
	flag.IntVar(&c.serverCPU, "server-cpu", 1, "server CPU (nginx, server veth NAPI)")
	flag.IntVar(&c.clientCPU, "client-cpu", 0, "client CPU (wrk, client veth NAPI)")
	flag.Parse()
	var err error
	if c.sizes, err = dp.ParseInts(*sizes); err == nil {
		err = c.r.Run("http", c.serverCPU, c.clientCPU, func(ctx context.Context, tmp string) error { return run(ctx, c, tmp) })
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
}

// sample is one wrk run.
type sample struct {
	requests                                    uint64
	perSec, serverUSPer, serverBusy, clientBusy float64
	verdictUS, replyUS                          float64 // Santa's programs, per run (bpf_stats)
}

func run(ctx context.Context, c config, tmp string) error {
	argv, err := nginxConfig(tmp, rig.ServerIPv4, c.sizes)
	if err != nil {
		return err
	}
	srv, err := netproc.Start(netproc.Spec{Name: "nginx", Argv: argv, Netns: c.r.ServerNS(), LogPath: tmp + "/nginx.log",
		Pin: true, CPU: c.serverCPU, Ready: func() error {
			conn, err := c.r.Dial("tcp", ports["on"])
			if err == nil {
				conn.Close()
			}
			return err
		}})
	if err != nil {
		return err
	}
	defer srv.Stop()
	off, err := startOffload(c)
	if err != nil {
		return err
	}
	defer off.close()
	order := slices.Clone(variants)
	got := map[string][]sample{}
	for round := range c.rounds {
		for _, size := range c.sizes {
			for _, variant := range order {
				s, err := runVariant(ctx, c, off, variant, size)
				if err != nil {
					return err
				}
				id := variantID(variant, size)
				got[id] = append(got[id], s)
				fmt.Fprintf(os.Stderr, "  %s round %d: %8.0f requests/s, %6.2f µs/request server, busy server %5.1f%% client %5.1f%%\n",
					id, round, s.perSec, s.serverUSPer, s.serverBusy, s.clientBusy)
			}
		}
		slices.Reverse(order)
	}
	for _, size := range c.sizes {
		for _, variant := range variants {
			id := variantID(variant, size)
			dp.Summary(id+"/requests_per_s", got[id], func(s sample) float64 { return s.perSec }, "requests/s")
			dp.Summary(id+"/server_us_per_request", got[id], func(s sample) float64 { return s.serverUSPer }, "us/request")
			dp.Summary(id+"/server_cpu_busy", got[id], func(s sample) float64 { return s.serverBusy }, "%")
			dp.Summary(id+"/client_cpu_busy", got[id], func(s sample) float64 { return s.clientBusy }, "%")
			if variant == "santa" {
				dp.Summary(id+"/verdict_us_per_run", got[id], func(s sample) float64 { return s.verdictUS }, "us/run")
				dp.Summary(id+"/reply_us_per_run", got[id], func(s sample) float64 { return s.replyUS }, "us/run")
			}
		}
		// Santa against nginx alone without sendfile, run by run.
		base, santa := got[variantID("off", size)], got[variantID("santa", size)]
		ratios := make([]float64, len(santa))
		for i := range santa {
			ratios[i] = santa[i].perSec / base[i].perSec
		}
		dp.Summary(fmt.Sprintf("http/santa_vs_nginx/size=%d/speedup", size), ratios, func(r float64) float64 { return r }, "x")
	}
	return nil
}

// runVariant runs wrk against a variant; for Santa's, it checks that Santa
// answered every request wrk counted.
func runVariant(ctx context.Context, c config, off *offload, variant string, size int) (sample, error) {
	if variant != "santa" {
		return wrk(ctx, c, ports[variant], size)
	}
	return runSanta(ctx, c, off, size)
}

// runSanta is one Santa sample, with its programs' costs.
func runSanta(ctx context.Context, c config, off *offload, size int) (sample, error) {
	before, err := off.answered()
	if err != nil {
		return sample{}, err
	}
	var s sample
	costs, err := off.programCosts(func() (err error) {
		s, err = wrk(ctx, c, ports["santa"], size)
		return err
	})
	if err != nil {
		return sample{}, err
	}
	s.verdictUS, s.replyUS = costs[0], costs[1]
	after, err := off.answered()
	if err == nil && after-before < s.requests {
		paths, _ := off.d.PathStats()
		err = fmt.Errorf("santa answered %d of the %d requests wrk counted (size %d; paths since the start: %v)",
			after-before, s.requests, size, paths)
	}
	return s, err
}

// variants of the server, in the order of the first round.
var variants = []string{"off", "on", "santa"}

func variantID(variant string, size int) string {
	if variant == "santa" {
		return fmt.Sprintf("http/server=nginx+santa/sendfile=off/size=%d", size)
	}
	return fmt.Sprintf("http/server=nginx/sendfile=%s/size=%d", variant, size)
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in ([0-9.]+)(us|ms|s|m),`)
	wrkErrors   = regexp.MustCompile(`Socket errors|Non-2xx`)
)

// wrk runs wrk from the client namespace against port for the file of
// size bytes, and reads both CPUs around it.
func wrk(ctx context.Context, c config, port, size int) (sample, error) {
	url := fmt.Sprintf("http://%s:%d/%d.bin", rig.ServerIPv4, port, size)
	var out []byte
	use, err := rig.Around(c.clientCPU, c.serverCPU, func() error {
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", c.r.ClientNS(), "taskset", "-c", strconv.Itoa(c.clientCPU),
			"wrk", "-t", "1", "-c", strconv.Itoa(c.connections), "-d", strconv.FormatFloat(c.duration.Seconds(), 'f', -1, 64)+"s",
			"--timeout", "2s", url)
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("wrk %s: %v\n%s", url, err, out)
		}
		return nil
	})
	if err != nil {
		return sample{}, err
	}
	if wrkErrors.Match(out) {
		return sample{}, fmt.Errorf("wrk %s saw errors:\n%s", url, out)
	}
	m := wrkRequests.FindSubmatch(out)
	if m == nil {
		return sample{}, fmt.Errorf("no request count in wrk's output:\n%s", out)
	}
	n, _ := strconv.ParseFloat(string(m[1]), 64)
	took, _ := strconv.ParseFloat(string(m[2]), 64)
	took *= map[string]float64{"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60}[string(m[3])]
	if n == 0 || took == 0 {
		return sample{}, fmt.Errorf("wrk %s: no requests answered:\n%s", url, out)
	}
	return sample{
		requests:    uint64(n),
		perSec:      n / took,
		serverUSPer: use.ServerUSPer(uint64(n)),
		serverBusy:  use.ServerBusyPct(),
		clientBusy:  use.ClientBusyPct(),
	}, nil
}
