// Command genrate measures bench/gen, the XDP load generator, in the rig
// (bench/rig.sh): how many requests per second one client core sends, what
// each costs that core, and how many reach the server veth. On the server
// side a second generator instance only counts the requests (gen_count on
// their destination port) and drops them, so the figure is the generator's
// and the veth's, not a server's. The requests are DNS queries, or any
// UDP payloads from a request file (-file, one hex payload per line, see
// gen.ReadPayloads) sent to -port.
//
// Needs root, iproute2, ethtool. The rig is removed on exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/popularity"
)

const clientPort = 40000

type config struct {
	r                    rig.Rig
	requests             int
	file                 string // request payloads; DNS queries if empty
	port                 uint16 // the requests' destination port
	pop                  popularity.Popularity
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
	flag.IntVar(&c.requests, "requests", 1000, "distinct DNS queries sent (without -file)")
	flag.StringVar(&c.file, "file", "", "request file: one UDP payload per line, in hex (# comments)")
	port := flag.Uint("port", 5353, "the requests' destination UDP port")
	flag.StringVar(&pop, "popularity", "uniform", "uniform or zipf:S")
	flag.Float64Var(&c.rate, "rate", 0, "requests per second; 0 sends open loop")
	flag.IntVar(&c.rounds, "rounds", 5, "runs")
	flag.DurationVar(&c.duration, "duration", 2*time.Second, "send time per run")
	flag.IntVar(&c.serverCPU, "server-cpu", 1, "server CPU (server veth NAPI)")
	flag.IntVar(&c.clientCPU, "client-cpu", 0, "client CPU (the generator, client veth NAPI)")
	flag.Parse()
	c.port = uint16(*port)
	var err error
	if *port == 0 || *port > 65535 {
		err = fmt.Errorf("-port %d: want 1 to 65535", *port)
	} else if c.pop, err = popularity.Parse(pop); err == nil {
		err = c.r.Run("gen", c.serverCPU, c.clientCPU, func(ctx context.Context, _ string) error { return run(ctx, c) })
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genrate:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	payloads, err := requestPayloads(c)
	if err != nil {
		return err
	}
	requests := rig.Requests(clientPort, c.port, payloads)
	g, err := c.r.OpenGenerator(gen.Config{Requests: requests, ReplyPort: clientPort, Popularity: c.pop, Seed: 1})
	if err != nil {
		return err
	}
	defer g.Close()
	sink, err := c.r.OpenSink(c.port, requests[0])
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
	id := fmt.Sprintf("gen/requests=%s/popularity=%s/rate=%s", dp.Human(len(payloads)), c.pop, gen.RateName(c.rate))
	dp.Summary(id+"/sent_per_s", samples, func(s sample) float64 { return s.sentPerSec }, "requests/s")
	dp.Summary(id+"/arrived_per_s", samples, func(s sample) float64 { return s.arrivedPerSec }, "requests/s")
	dp.Summary(id+"/client_thread_us_per_request", samples, func(s sample) float64 { return s.threadUSPer }, "us/request")
	dp.Summary(id+"/client_cpu_busy", samples, func(s sample) float64 { return s.clientBusy }, "%")
	dp.Summary(id+"/server_cpu_busy", samples, func(s sample) float64 { return s.serverBusy }, "%")
	return nil
}

// requestPayloads are the request file's payloads, or c.requests DNS
// queries.
func requestPayloads(c config) ([][]byte, error) {
	if c.file != "" {
		f, err := os.Open(c.file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		payloads, err := gen.ReadPayloads(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.file, err)
		}
		return payloads, nil
	}
	payloads := make([][]byte, c.requests)
	for i := range payloads {
		payloads[i] = pkttest.DNSQuery(uint16(i), pkttest.Name(i))
	}
	return payloads, nil
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
