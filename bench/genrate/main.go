// Command genrate measures bench/gen, the XDP load generator, in the rig
// (bench/rig.sh): how many requests per second one client core sends, what
// each costs that core, and how many reach the server veth. On the server
// side a second generator instance only counts the requests (gen_count on
// their destination port) and drops them, so the figure is the generator's
// and the veth's, not a server's.
//
// Needs root, iproute2, ethtool. The rig is removed on exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/rig"
)

const (
	clientPort = 40000
	serverPort = 5353
)

type config struct {
	r                    rig.Rig
	requests             int
	pop                  gen.Popularity
	rate                 float64
	rounds               int
	duration             time.Duration
	serverCPU, clientCPU int
}

func main() {
	var c config
	var pop string
	flag.StringVar(&c.r.Name, "rig", "sbgen", "rig name (namespaces NAME-srv, NAME-cli)")
	flag.StringVar(&c.r.Script, "rig-script", "bench/rig.sh", "path of rig.sh")
	flag.IntVar(&c.requests, "requests", 1000, "distinct DNS queries sent")
	flag.StringVar(&pop, "popularity", "uniform", "uniform or zipf:S")
	flag.Float64Var(&c.rate, "rate", 0, "requests per second; 0 sends open loop")
	flag.IntVar(&c.rounds, "rounds", 5, "runs")
	flag.DurationVar(&c.duration, "duration", 2*time.Second, "send time per run")
	flag.IntVar(&c.serverCPU, "server-cpu", 1, "server CPU (server veth NAPI)")
	flag.IntVar(&c.clientCPU, "client-cpu", 0, "client CPU (the generator, client veth NAPI)")
	flag.Parse()
	var err error
	if c.pop, err = gen.ParsePopularity(pop); err == nil {
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genrate:", err)
		os.Exit(1)
	}
}

func run(c config) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	idle, err := c.r.Start(c.serverCPU, c.clientCPU)
	if err != nil {
		return err
	}
	defer c.r.Stop(&err)
	fmt.Printf("RESULT name=gen/idle_server_cpu_busy value=%.3f unit=%%\n", idle)

	requests := queries(c.requests)
	g, err := c.r.OpenGenerator(gen.Config{Requests: requests, ReplyPort: clientPort, Popularity: c.pop, Seed: 1})
	if err != nil {
		return err
	}
	defer g.Close()
	sink, err := c.r.OpenSink(serverPort, requests[0])
	if err != nil {
		return fmt.Errorf("server-side counter: %w", err)
	}
	defer sink.Close()

	var samples []sample
	for round := range c.rounds {
		s, err := measure(ctx, c, g, sink)
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		fmt.Fprintf(os.Stderr, "  round %d: %.0f sent/s, %.0f arrived/s, %.3f µs of the client thread per request, client CPU %.1f%% busy, server CPU %.1f%% busy\n",
			round, s.sentPerSec, s.arrivedPerSec, s.threadUSPer, s.clientBusy, s.serverBusy)
		samples = append(samples, s)
	}
	id := fmt.Sprintf("gen/requests=%s/popularity=%s/rate=%s", dp.Human(c.requests), c.pop, gen.RateName(c.rate))
	dp.Summary(id+"/sent_per_s", samples, func(s sample) float64 { return s.sentPerSec }, "requests/s")
	dp.Summary(id+"/arrived_per_s", samples, func(s sample) float64 { return s.arrivedPerSec }, "requests/s")
	dp.Summary(id+"/client_thread_us_per_request", samples, func(s sample) float64 { return s.threadUSPer }, "us/request")
	dp.Summary(id+"/client_cpu_busy", samples, func(s sample) float64 { return s.clientBusy }, "%")
	dp.Summary(id+"/server_cpu_busy", samples, func(s sample) float64 { return s.serverBusy }, "%")
	return nil
}

// queries are n DNS queries from the client to the server, as frames.
func queries(n int) [][]byte {
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = dp.DNSQuery(uint16(i), dp.Name(i))
	}
	return rig.Requests(clientPort, serverPort, payloads)
}

type sample struct {
	sentPerSec, arrivedPerSec float64
	threadUSPer               float64 // CPU time of the sending thread per request sent
	clientBusy, serverBusy    float64 // % of each CPU
}

// measure runs the generator once for c.duration; the sink's count is what
// arrived.
func measure(ctx context.Context, c config, g, sink *gen.Generator) (sample, error) {
	s0, err := sink.Counters()
	if err != nil {
		return sample{}, err
	}
	m, err := c.r.Measure(ctx, g, c.duration, c.rate, c.clientCPU, c.serverCPU)
	if err != nil {
		return sample{}, err
	}
	s1, err := sink.Counters()
	if err != nil {
		return sample{}, err
	}
	s := sample{sentPerSec: m.PerSec(m.Sent), arrivedPerSec: m.PerSec(s1.Replies - s0.Replies),
		clientBusy: m.ClientBusyPct(), serverBusy: m.ServerBusyPct()}
	if m.Sent > 0 {
		s.threadUSPer = float64(m.SendCPU.Nanoseconds()) / 1e3 / float64(m.Sent)
	}
	return s, nil
}
