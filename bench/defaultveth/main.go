// Command defaultveth measures the path a local client's requests take: a
// DNS server (BIND, one thread, pinned to the server CPU) alone and with
// Santa answering every name it is asked for from one rule each, in the
// rig (bench/rig.sh) with the veths' default offloads and threaded NAPI
// (GRO on) on both ends. The client's TX checksum offload is turned off
// (full checksums, as from a NIC) or left on (its default, as in every
// container network: the requests carry partial checksums) cell by cell.
// The client is a closed-loop socket client (internal/dnsload: a window
// of queries outstanding, a timeout, every reply checked byte for byte
// against the server's own). The cells are interleaved in random order
// within each round.
//
// Each cell reports replies/s, the server side's CPU time per reply
// (BIND's threads and the server veth's NAPI threads, where XDP and TC
// run: other work on the shared machine does not count), the queries lost
// (timed out and never answered), and with Santa the share it answered
// and the data plane's path counters: which program answered, and why a
// request went to TC. With -diag it also prints the kernel's own counters
// that change during a run (the veths' ethtool statistics, the namespaces'
// SNMP counters): where a lost query or reply went.
//
// Needs root and bind9 (make bench-deps). Everything it starts or creates
// is removed on exit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/dnsload"
	"github.com/santa-offload/santa/internal/dnstest"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/popularity"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/rule"
)

type config struct {
	r                    rig.Rig
	serverCPU, clientCPU int
	names, window        int
	timeout, duration    time.Duration
	rounds               int
	cells                []cell
	diag                 bool
}

// A cell is one measurement: the server alone or with Santa, the client's
// checksums full or partial.
type cell struct {
	santa   bool
	partial bool
}

func (c cell) String() string {
	return fmt.Sprintf("%s/%s", map[bool]string{false: "alone", true: "santa"}[c.santa],
		map[bool]string{false: "full_csum", true: "partial_csum"}[c.partial])
}

func main() {
	c, err := parseFlags()
	if err == nil {
		err = c.r.Run("defaultveth", c.serverCPU, c.clientCPU, func(ctx context.Context, tmp string) error {
			return run(ctx, c, tmp)
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "defaultveth:", err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	c := config{r: rig.Rig{Script: "bench/rig.sh"}}
	flag.BoolVar(&c.r.DefaultOffloads, "default-offloads", true, "the veths keep their default offloads (false: the rig's usual TX checksum offload off on both ends, before the cells set the client's)")
	flag.StringVar(&c.r.Name, "rig", "sbveth", "rig name (bench/rig.sh)")
	flag.IntVar(&c.serverCPU, "server-cpu", 1, "CPU of the server, its NAPI and Santa")
	flag.IntVar(&c.clientCPU, "client-cpu", 0, "CPU of the client and its NAPI")
	flag.IntVar(&c.names, "names", 1000, "names asked for, one rule each")
	flag.IntVar(&c.window, "window", 64, "queries outstanding")
	flag.DurationVar(&c.timeout, "timeout", 20*time.Millisecond, "a query not answered within this is lost")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "send time per cell")
	flag.IntVar(&c.rounds, "rounds", 3, "interleaved rounds")
	cells := flag.String("cells", "alone/full,alone/partial,santa/full,santa/partial", "cells: alone|santa / full|partial")
	flag.BoolVar(&c.diag, "diag", false, "print the kernel counters that change during each run")
	flag.Parse()
	if err := dnstest.Available(dnstest.BIND); err != nil {
		return c, err
	}
	for _, s := range strings.Split(*cells, ",") {
		who, csum, _ := strings.Cut(s, "/")
		if (who != "alone" && who != "santa") || (csum != "full" && csum != "partial") {
			return c, fmt.Errorf("-cells: %q: want alone|santa/full|partial", s)
		}
		c.cells = append(c.cells, cell{santa: who == "santa", partial: csum == "partial"})
	}
	switch {
	case c.names < 1 || c.names > 100000:
		return c, fmt.Errorf("-names %d: want 1 to 100000", c.names)
	case c.window < 1 || c.window > dnsload.MaxWindow:
		return c, fmt.Errorf("-window %d: want 1 to %d", c.window, dnsload.MaxWindow)
	case c.rounds < 1 || c.duration <= 0 || c.timeout <= 0:
		return c, errors.New("-rounds, -duration and -timeout must be positive")
	}
	return c, nil
}

// bench is BIND in the rig, the queries and their expected replies, and
// Santa's data plane with a rule for each query on BIND's socket.
type bench struct {
	c      config
	forms  []dnsload.Form
	expect []dnsload.Expect
	srv    *dnstest.Server
	d      *datapath.Datapath
	svcs   []model.ServiceID
	// attached: the data plane runs on the server veth.
	attached bool
}

func run(ctx context.Context, c config, tmp string) error {
	srv, err := dnstest.Start(dnstest.Config{Kind: dnstest.BIND, Netns: c.r.ServerNS(), Dir: tmp,
		Addrs: []netip.Addr{netip.MustParseAddr(rig.ServerIPv4)}, Threads: 1, Names: c.names, Pin: true, CPU: c.serverCPU})
	if err != nil {
		return err
	}
	defer srv.Stop()
	b := &bench{c: c, srv: srv, forms: dnsload.Forms(dnstest.Questions(c.names)[:c.names], []dnsload.Shape{dnsload.RD})}
	conn, err := dnsload.Dial(c.r.ClientNS(), b.server())
	if err != nil {
		return err
	}
	b.expect, err = dnsload.Capture(conn, b.forms, 2)
	conn.Close()
	if err != nil {
		return err
	}
	if err := b.openSanta(); err != nil {
		return err
	}
	defer b.d.Close()
	id := fmt.Sprintf("defaultveth/server=bind/names=%s/window=%d", dp.Human(c.names), c.window)
	got := map[cell][]sample{}
	for round := range c.rounds {
		order := slices.Clone(c.cells)
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, cl := range order {
			s, err := b.measure(ctx, cl)
			if err != nil {
				return fmt.Errorf("%v: %w", cl, err)
			}
			fmt.Fprintf(os.Stderr, "round %d %-20v %v\n", round+1, cl, s)
			got[cl] = append(got[cl], s)
		}
	}
	for _, cl := range c.cells {
		report(id+"/"+cl.String(), got[cl])
	}
	return nil
}

func (b *bench) server() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(rig.ServerIPv4), 53)
}

// openSanta registers BIND's socket with a data plane of its own and
// installs a rule for every form; it attaches only for Santa's cells.
func (b *bench) openSanta() error {
	bound, err := procsock.BoundUDP(netns.Named(b.c.r.ServerNS()), 53, b.server().Addr())
	if err != nil {
		return err
	}
	if err := rig.InNetns(b.c.r.ServerNS(), func() (err error) {
		b.d, err = datapath.Open(datapath.Options{NoPin: true, MaxRules: 4 * uint32(b.c.names), MaxServices: 16})
		return err
	}); err != nil {
		return err
	}
	rules := make([]rule.Rule, len(b.forms))
	for i, f := range b.forms {
		rules[i] = dnsmsg.Rule(f.Query(0), b.expect[i].Reply)
	}
	for _, s := range bound {
		pid, n, err := procsock.Holder(s.Inode)
		if err != nil {
			return err
		}
		fd, err := procsock.TakeFD(pid, n)
		if err != nil {
			return err
		}
		svc, err := b.d.AddSocket(fd)
		os.NewFile(uintptr(fd), "bind").Close() // the service keeps the socket's cookie, not the fd
		if err != nil {
			return err
		}
		if _, err := b.d.AddRules(svc, rules); err != nil {
			return err
		}
		b.svcs = append(b.svcs, svc)
	}
	return nil
}

// sample is one cell's run.
type sample struct {
	res      dnsload.Result
	serverNS uint64          // CPU time of the server side's threads
	paths    model.PathStats // with Santa: the change during the run
	answered uint64          // by Santa
}

func (s sample) lost() int { return max(0, s.res.Timeouts-s.res.Unexpected) }

func (s sample) perSec() float64 { return float64(s.res.Replies) / s.res.Elapsed.Seconds() }

// usPerReply counts late replies too: the server side did their work.
func (s sample) usPerReply() float64 {
	return float64(s.serverNS) / 1e3 / float64(max(1, s.res.Replies+s.res.Unexpected))
}

func (s sample) String() string {
	str := fmt.Sprintf("%8.0f replies/s  %5.2f µs/reply  lost %d of %d (%d timeouts, %d late or unexpected, %d mismatches)",
		s.perSec(), s.usPerReply(), s.lost(), s.res.Sent, s.res.Timeouts,
		s.res.Unexpected, s.res.Mismatches)
	if s.paths != nil {
		str += "  santa answered " + fmt.Sprint(s.answered) + ", paths: " + nonZero(s.paths)
	}
	return str
}

func (b *bench) measure(ctx context.Context, cl cell) (sample, error) {
	var s sample
	if err := b.c.r.SetClientTxChecksum(cl.partial); err != nil {
		return s, err
	}
	if err := b.setSanta(cl.santa); err != nil {
		return s, err
	}
	time.Sleep(100 * time.Millisecond) // let the change settle
	var p0 model.PathStats
	a0, err := b.answered()
	if err == nil {
		p0, err = b.d.PathStats()
	}
	if err != nil {
		return s, err
	}
	var k0 kernelCounters
	if b.c.diag {
		k0 = readKernelCounters(b.c.r)
	}
	tasks, err := b.serverThreads()
	if err != nil {
		return s, err
	}
	t0, err := rig.TaskTime(tasks)
	if err != nil {
		return s, err
	}
	s.res, err = dnsload.Run(ctx, dnsload.Config{Netns: b.c.r.ClientNS(), Server: b.server(), Forms: b.forms,
		Expect: b.expect, Popularity: popularity.Uniform, Seed: rand.Uint64(), Count: 1 << 30,
		Duration: b.c.duration, Window: b.c.window, Timeout: b.c.timeout})
	if err != nil {
		return s, err
	}
	t1, err := rig.TaskTime(tasks)
	if err != nil {
		return s, err
	}
	s.serverNS = t1 - t0
	if s.res.Mismatches > 0 {
		return s, fmt.Errorf("%d replies were not the server's:\n%s", s.res.Mismatches, s.res.Report(b.forms))
	}
	if b.c.diag {
		printDiff(k0, readKernelCounters(b.c.r))
	}
	if !cl.santa {
		return s, nil
	}
	a1, err := b.answered()
	if err != nil {
		return s, err
	}
	p1, err := b.d.PathStats()
	if err != nil {
		return s, err
	}
	s.answered = a1 - a0
	s.paths = model.PathStats{}
	for k, v := range p1 {
		s.paths[k] = v - p0[k]
	}
	return s, nil
}

// serverThreads are the threads that work for the server side: BIND's and
// the server veth's NAPI kthreads (XDP and TC run there).
func (b *bench) serverThreads() ([]int, error) {
	tasks := rig.NapiThreads(b.c.r.ServerDev())
	if len(tasks) == 0 {
		return nil, fmt.Errorf("no NAPI thread of %s", b.c.r.ServerDev())
	}
	for _, pid := range b.srv.Pids() {
		tids, err := rig.Threads(pid)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, tids...)
	}
	return tasks, nil
}

func (b *bench) answered() (uint64, error) {
	var n uint64
	for _, svc := range b.svcs {
		st, err := b.d.ServiceStats(svc)
		if err != nil {
			return 0, err
		}
		n += st.Matched
	}
	return n, nil
}

// setSanta attaches the data plane to the server veth, or detaches it.
func (b *bench) setSanta(on bool) error {
	if on == b.attached {
		return nil
	}
	if !on {
		b.attached = false
		return b.d.Detach(b.c.r.ServerDev())
	}
	return rig.InNetns(b.c.r.ServerNS(), func() error {
		att, err := b.d.Attach(b.c.r.ServerDev())
		if err == nil && att.XDP != model.XDPNative {
			err = fmt.Errorf("XDP attached in %s mode, not native", att.XDP)
		}
		b.attached = err == nil
		return err
	})
}

func nonZero(p model.PathStats) string {
	var parts []string
	for k, v := range p {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// report prints a cell's RESULT lines: medians over the rounds, with the
// range in the unit's text.
func report(name string, got []sample) {
	stat := func(what, unit string, f func(sample) float64) {
		xs := make([]float64, len(got))
		for i, s := range got {
			xs[i] = f(s)
		}
		fmt.Printf("RESULT name=%s/%s value=%.3f unit=%s range=%.3f..%.3f runs=%d\n", name, what, dp.MedianF(xs), unit,
			slices.Min(xs), slices.Max(xs), len(xs))
	}
	stat("replies_per_s", "1/s", sample.perSec)
	stat("server_us_per_reply", "us/reply", sample.usPerReply)
	stat("lost", "%", func(s sample) float64 { return 100 * float64(s.lost()) / float64(max(1, s.res.Sent)) })
	if got[0].paths != nil {
		stat("answered_by_santa", "%", func(s sample) float64 {
			return 100 * float64(s.answered) / float64(max(1, s.res.Sent))
		})
	}
}
