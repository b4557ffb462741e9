package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/dnsload"
	"github.com/santa-offload/santa/internal/dnstest"
	"github.com/santa-offload/santa/internal/popularity"
)

var dnsperfQPS = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)

// dnsperfLines is the length of a query file drawn from a popularity:
// dnsperf sends its lines in order and starts over.
const dnsperfLines = 1 << 20

// dnsperf runs dnsperf (one thread, pinned to the client CPU, 500 queries
// outstanding) for d with the queries in qfile, against whatever answers
// now, and reports its replies per second (dnsperf's "queries per
// second" counts the answered ones) and the server CPU's work.
func dnsperf(ctx context.Context, s setup, d time.Duration, qfile string) (scenario.ClientSample, error) {
	secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	var out []byte
	use, err := rig.Around(s.ClientCPU, s.ServerCPU, func() error {
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", s.Rig.ClientNS(), "taskset", "-c", fmt.Sprint(s.ClientCPU),
			"dnsperf", "-s", rig.ServerIPv4, "-d", qfile, "-l", secs, "-c", "1", "-T", "1", "-q", "500", "-t", "1")
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("dnsperf: %v\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		return scenario.ClientSample{}, err
	}
	m := dnsperfQPS.FindSubmatch(out)
	if m == nil {
		return scenario.ClientSample{}, fmt.Errorf("no queries per second in dnsperf's output:\n%s", out)
	}
	qps, _ := strconv.ParseFloat(string(m[1]), 64)
	// Over dnsperf's sending time: it also starts up and waits for late
	// replies, when the server has nothing to do.
	r := scenario.ClientSample{Replies: qps, ServerBusy: 100 * float64(use.ServerBusy) / (d.Seconds() * rig.UserHZ)}
	if qps > 0 {
		r.ServerUSPer = float64(use.ServerBusy) / rig.UserHZ * 1e6 / (qps * d.Seconds())
	}
	return r, nil
}

// runDnsperfAlone runs dnsperf against the server alone for d, asking for
// every name in turn.
func runDnsperfAlone(ctx context.Context, s setup, d time.Duration, id, dir string) error {
	seq := make([]uint32, s.Items)
	for i := range seq {
		seq[i] = uint32(i)
	}
	qfile := filepath.Join(dir, "dnsperf-all.queries")
	if err := writeDnsperfQueries(qfile, s.Items, seq); err != nil {
		return err
	}
	r, err := dnsperf(ctx, s, d, qfile)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  %s dnsperf: %.0f queries/s, server CPU %.1f%% busy\n", id, r.Replies, r.ServerBusy)
	fmt.Printf("RESULT name=%s/client=dnsperf/queries_per_s value=%.3f unit=queries/s\n", id, r.Replies)
	fmt.Printf("RESULT name=%s/client=dnsperf/server_cpu_busy value=%.3f unit=%%\n", id, r.ServerBusy)
	if r.Replies > 0 {
		fmt.Printf("RESULT name=%s/client=dnsperf/server_us_per_query value=%.3f unit=us/query\n", id, r.ServerUSPer)
	}
	return nil
}

// dnsperfClient is dnsperf as the scenario's second client: each run asks
// for the names with the popularity of the sweep, from a query file of
// dnsperfLines draws (written once per popularity into dir).
func dnsperfClient(s setup, d time.Duration, dir string) *scenario.Client {
	files := map[popularity.Popularity]string{}
	return &scenario.Client{Name: "dnsperf", Run: func(ctx context.Context, pop popularity.Popularity) (scenario.ClientSample, error) {
		qfile, ok := files[pop]
		if !ok {
			qfile = filepath.Join(dir, "dnsperf-"+pop.String()+".queries")
			if err := writeDnsperfQueries(qfile, s.Items, pop.Sequence(s.Items, dnsperfLines, 1)); err != nil {
				return scenario.ClientSample{}, err
			}
			files[pop] = qfile
		}
		r, err := dnsperf(ctx, s, d, qfile)
		if err == nil {
			fmt.Fprintf(os.Stderr, "    dnsperf %s: %.0f replies/s, %.2f µs/reply server, busy %.1f%%\n",
				pop, r.Replies, r.ServerUSPer, r.ServerBusy)
		}
		return r, err
	}}
}

// writeDnsperfQueries writes dnsperf's query file: the A queries for the
// names seq draws from the first n.
func writeDnsperfQueries(path string, n int, seq []uint32) error {
	qs := make([]dnsload.Question, n)
	for i := range n {
		qs[i] = dnsload.Question{Name: dnstest.Name(i), Type: dnsload.TypeA}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = dnsload.WriteDnsperfQueries(f, qs, seq)
	return errors.Join(err, f.Close())
}
