package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"

	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/dnsload"
	"github.com/santa-offload/santa/internal/dnstest"
)

var dnsperfQPS = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)

// runDnsperf runs dnsperf (one thread, pinned to the client CPU) against
// the server alone for c.dnsperf, asking for every name in turn, and
// reports its queries per second and the server CPU per query.
func runDnsperf(ctx context.Context, c config, id, dir string) error {
	qfile := dir + "/dnsperf.queries"
	if err := writeDnsperfQueries(qfile, c.Items); err != nil {
		return err
	}
	secs := strconv.FormatFloat(c.dnsperf.Seconds(), 'f', -1, 64)
	var out []byte
	use, err := rig.Around(c.ClientCPU, c.ServerCPU, func() error {
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", c.Rig.ClientNS(), "taskset", "-c", fmt.Sprint(c.ClientCPU),
			"dnsperf", "-s", rig.ServerIPv4, "-d", qfile, "-l", secs, "-c", "1", "-T", "1", "-q", "500", "-t", "1")
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("dnsperf: %v\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		return err
	}
	m := dnsperfQPS.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("no queries per second in dnsperf's output:\n%s", out)
	}
	qps, _ := strconv.ParseFloat(string(m[1]), 64)
	// Over dnsperf's sending time: it also starts up and waits for late
	// replies, when the server has nothing to do.
	busy := 100 * float64(use.ServerBusy) / (c.dnsperf.Seconds() * rig.UserHZ)
	fmt.Fprintf(os.Stderr, "  %s dnsperf: %.0f queries/s, server CPU %.1f%% busy\n", id, qps, busy)
	fmt.Printf("RESULT name=%s/client=dnsperf/queries_per_s value=%.3f unit=queries/s\n", id, qps)
	fmt.Printf("RESULT name=%s/client=dnsperf/server_cpu_busy value=%.3f unit=%%\n", id, busy)
	if qps > 0 {
		us := float64(use.ServerBusy) / rig.UserHZ * 1e6 / (qps * c.dnsperf.Seconds())
		fmt.Printf("RESULT name=%s/client=dnsperf/server_us_per_query value=%.3f unit=us/query\n", id, us)
	}
	return nil
}

// writeDnsperfQueries writes dnsperf's query file: every name, in order.
func writeDnsperfQueries(path string, n int) error {
	qs, seq := make([]dnsload.Question, n), make([]uint32, n)
	for i := range n {
		qs[i], seq[i] = dnsload.Question{Name: dnstest.Name(i), Type: dnsload.TypeA}, uint32(i)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = dnsload.WriteDnsperfQueries(f, qs, seq)
	return errors.Join(err, f.Close())
}
