// Command defaultveth measures the path a local client's requests take: a
// server (BIND, one thread, or memcached, one worker thread; pinned to the
// server CPU) alone and with Santa answering every request it is asked
// from one rule each, in the rig (bench/rig.sh) with the veths' default
// offloads and threaded NAPI (GRO on) on both ends, and over loopback in
// the server's namespace. Cell by cell the requests carry full checksums
// (as from a NIC: the client veth's TX checksum offload off; over
// loopback, whose offload is fixed on, a client that corks each request)
// or partial ones (the default of every container network and of
// loopback). The client is a
// closed-loop socket client (internal/dnsload: a window of requests
// outstanding, a timeout, every reply checked byte for byte against the
// server's own; with -batch, issue 24's shape: requests sent with
// sendmmsg and replies read with recvmmsg, except the corked ones, sent
// one by one). The cells are interleaved in random order within each
// round.
//
// Each cell reports replies/s, the server side's CPU time per reply, the
// requests lost (timed out and never answered), and with Santa the share
// it answered and the data plane's path counters: which program answered,
// and why a request went to TC. The server side is, on veth, the server's
// threads and the server veth's NAPI threads, where XDP and TC run (other
// work on the shared machine does not count); on loopback, whose receive
// runs in softirq, the server's threads and the server CPU's softirq time,
// RPS sending lo's receive to the server CPU (lo.go). With -diag it also
// prints the kernel's own counters that change during a run (the veths'
// ethtool statistics, the namespaces' SNMP counters): where a lost request
// or reply went.
//
// Needs root, bind9 and memcached (make bench-deps). Everything it starts
// or creates is removed on exit.
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
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/popularity"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/rule"
)

type config struct {
	r                    rig.Rig
	server               string
	serverCPU, clientCPU int
	items, window, batch int
	timeout, duration    time.Duration
	rounds               int
	cells                []cell
	diag                 bool
}

// A cell is one measurement: over the veth or loopback, the server alone
// or with Santa, the client's checksums full or partial.
type cell struct {
	lo      bool
	santa   bool
	partial bool
}

func (c cell) String() string {
	return fmt.Sprintf("%s/%s/%s", map[bool]string{false: "veth", true: "lo"}[c.lo],
		map[bool]string{false: "alone", true: "santa"}[c.santa],
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
	flag.StringVar(&c.server, "server", "bind", "the server: bind or memcached")
	flag.IntVar(&c.items, "items", 1000, "names (BIND) or keys (memcached) asked for, one rule each")
	flag.IntVar(&c.window, "window", 64, "queries outstanding")
	flag.IntVar(&c.batch, "batch", 1, "queries per sendmmsg and replies per recvmmsg (1: one write and one read per query)")
	flag.DurationVar(&c.timeout, "timeout", 20*time.Millisecond, "a query not answered within this is lost")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "send time per cell")
	flag.IntVar(&c.rounds, "rounds", 3, "interleaved rounds")
	cells := flag.String("cells", "alone/full,alone/partial,santa/full,santa/partial", "cells: alone|santa / full|partial")
	devices := flag.String("devices", "veth,lo", "where the client sends from: veth (the client namespace), lo (loopback in the server's), or both")
	flag.BoolVar(&c.diag, "diag", false, "print the kernel counters that change during each run")
	flag.Parse()
	if err := serverAvailable(c.server); err != nil {
		return c, err
	}
	for _, d := range strings.Split(*devices, ",") {
		if d != "veth" && d != "lo" {
			return c, fmt.Errorf("-devices: %q: want veth or lo", d)
		}
		for _, s := range strings.Split(*cells, ",") {
			who, csum, _ := strings.Cut(s, "/")
			if (who != "alone" && who != "santa") || (csum != "full" && csum != "partial") {
				return c, fmt.Errorf("-cells: %q: want alone|santa/full|partial", s)
			}
			c.cells = append(c.cells, cell{lo: d == "lo", santa: who == "santa", partial: csum == "partial"})
		}
	}
	switch {
	case c.items < 1 || c.items > 100000:
		return c, fmt.Errorf("-items %d: want 1 to 100000", c.items)
	case c.window < 1 || c.window > dnsload.MaxWindow:
		return c, fmt.Errorf("-window %d: want 1 to %d", c.window, dnsload.MaxWindow)
	case c.batch < 1 || c.batch > dnsload.MaxBatch:
		return c, fmt.Errorf("-batch %d: want 1 to %d", c.batch, dnsload.MaxBatch)
	case c.rounds < 1 || c.duration <= 0 || c.timeout <= 0:
		return c, errors.New("-rounds, -duration and -timeout must be positive")
	}
	return c, nil
}

// bench is the server in the rig, its requests and their expected
// replies, and Santa's data plane with a rule for each request on the
// server's sockets (the veth's address and loopback).
type bench struct {
	c      config
	expect []dnsload.Expect
	srv    *server
	d      *datapath.Datapath
	svcs   []model.ServiceID
	// attached: the device the data plane runs on ("": none).
	attached string
}

func run(ctx context.Context, c config, tmp string) error {
	srv, err := startServer(c.server, c, tmp)
	if err != nil {
		return err
	}
	defer srv.stop()
	b := &bench{c: c, srv: srv}
	conn, err := dnsload.Dial(c.r.ClientNS(), b.addr(false))
	if err != nil {
		return err
	}
	b.expect, err = dnsload.Capture(conn, srv.forms, 2)
	conn.Close()
	if err == nil {
		err = srv.checkReplies(b.expect)
	}
	if err != nil {
		return err
	}
	if slices.ContainsFunc(c.cells, func(cl cell) bool { return cl.lo }) {
		if err := steerLoopback(c.r.ServerNS(), c.serverCPU); err != nil {
			return err
		}
	}
	if err := b.openSanta(); err != nil {
		return err
	}
	defer b.d.Close()
	id := fmt.Sprintf("defaultveth/server=%s/items=%s/window=%d", srv.name, dp.Human(c.items), c.window)
	if c.batch > 1 { // the unbatched runs keep their names
		id += fmt.Sprintf("/batch=%d", c.batch)
	}
	got := map[cell][]sample{}
	for round := range c.rounds {
		order := slices.Clone(c.cells)
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, cl := range order {
			s, err := b.measure(ctx, cl)
			if err != nil {
				return fmt.Errorf("%v: %w", cl, err)
			}
			fmt.Fprintf(os.Stderr, "round %d %-24v %v\n", round+1, cl, s)
			got[cl] = append(got[cl], s)
		}
	}
	for _, cl := range c.cells {
		report(id+"/"+cl.String(), got[cl])
	}
	for _, lo := range []bool{false, true} {
		full, partial := got[cell{lo: lo, santa: true}], got[cell{lo: lo, santa: true, partial: true}]
		if len(full) > 0 && len(partial) > 0 {
			reportRatio(id+"/"+strings.TrimSuffix(cell{lo: lo}.String(), "/alone/full_csum"), full, partial)
		}
	}
	return nil
}

// addr is where the client sends: the server veth's address, or loopback.
func (b *bench) addr(lo bool) netip.AddrPort {
	if lo {
		return netip.AddrPortFrom(loopback, b.srv.port)
	}
	return netip.AddrPortFrom(netip.MustParseAddr(rig.ServerIPv4), b.srv.port)
}

// openSanta registers the server's sockets with a data plane of its own
// and installs a rule for every request on each; it attaches only for
// Santa's cells.
func (b *bench) openSanta() error {
	if err := rig.InNetns(b.c.r.ServerNS(), func() (err error) {
		b.d, err = datapath.Open(datapath.Options{NoPin: true, MaxRules: 4 * uint32(b.c.items), MaxServices: 16})
		return err
	}); err != nil {
		return err
	}
	rules := make([]rule.Rule, len(b.srv.forms))
	for i := range b.srv.forms {
		rules[i] = b.srv.rule(i, b.expect[i].Reply)
	}
	for _, lo := range []bool{false, true} {
		bound, err := procsock.BoundUDP(netns.Named(b.c.r.ServerNS()), b.srv.port, b.addr(lo).Addr())
		if err != nil {
			return err
		}
		if len(bound) == 0 {
			return fmt.Errorf("%s has no UDP socket on %v", b.srv.name, b.addr(lo))
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
			os.NewFile(uintptr(fd), b.srv.name).Close() // the service keeps the socket's cookie, not the fd
			if err != nil {
				return err
			}
			if _, err := b.d.AddRules(svc, rules); err != nil {
				return err
			}
			b.svcs = append(b.svcs, svc)
		}
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

func (s sample) lost() int { return max(0, s.res.Timeouts-s.res.Late) }

func (s sample) perSec() float64 { return float64(s.res.Replies) / s.res.Elapsed.Seconds() }

// usPerReply counts late replies too: the server side did their work.
func (s sample) usPerReply() float64 {
	return float64(s.serverNS) / 1e3 / float64(max(1, s.res.Replies+s.res.Late))
}

func (s sample) String() string {
	str := fmt.Sprintf("%8.0f replies/s  %5.2f µs/reply  lost %d of %d (%d timeouts, %d late, %d unexpected, %d mismatches)",
		s.perSec(), s.usPerReply(), s.lost(), s.res.Sent, s.res.Timeouts, s.res.Late,
		s.res.Unexpected, s.res.Mismatches)
	if s.paths != nil {
		str += "  santa answered " + fmt.Sprint(s.answered) + ", paths: " + nonZero(s.paths)
	}
	return str
}

func (b *bench) measure(ctx context.Context, cl cell) (sample, error) {
	var s sample
	clientNS, dev := b.c.r.ClientNS(), b.c.r.ServerDev()
	err := b.c.r.SetClientTxChecksum(cl.partial)
	if cl.lo {
		clientNS, dev = b.c.r.ServerNS(), "lo" // lo's TX checksum offload is fixed on: the client corks
	}
	if err != nil {
		return s, err
	}
	if !cl.santa {
		dev = ""
	}
	if err := b.setSanta(dev); err != nil {
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
	t0, err := b.serverTime(cl.lo)
	if err != nil {
		return s, err
	}
	s.res, err = dnsload.Run(ctx, dnsload.Config{Netns: clientNS, Server: b.addr(cl.lo), Forms: b.srv.forms,
		Expect: b.expect, Popularity: popularity.Uniform, Seed: rand.Uint64(), Count: 1 << 30,
		Duration: b.c.duration, Window: b.c.window, Batch: b.c.batch, Timeout: b.c.timeout,
		FullChecksums: cl.lo && !cl.partial})
	if err != nil {
		return s, err
	}
	t1, err := b.serverTime(cl.lo)
	if err != nil {
		return s, err
	}
	s.serverNS = t1 - t0
	if s.res.Mismatches > 0 {
		return s, fmt.Errorf("%d replies were not the server's:\n%s", s.res.Mismatches, s.res.Report(b.srv.forms))
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

// serverTime is the server side's CPU time so far (ns): the server's
// threads and, over the veth, the server veth's NAPI kthreads (XDP and TC
// run there), or, over loopback, the server CPU's softirq time (lo.go).
func (b *bench) serverTime(lo bool) (uint64, error) {
	var tasks []int
	if !lo {
		if tasks = rig.NapiThreads(b.c.r.ServerDev()); len(tasks) == 0 {
			return 0, fmt.Errorf("no NAPI thread of %s", b.c.r.ServerDev())
		}
	}
	for _, pid := range b.srv.pids() {
		tids, err := rig.Threads(pid)
		if err != nil {
			return 0, err
		}
		tasks = append(tasks, tids...)
	}
	ns, err := rig.TaskTime(tasks)
	if err != nil || !lo {
		return ns, err
	}
	softirq, err := rig.SoftirqNS(b.c.serverCPU)
	return ns + softirq, err
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

// setSanta attaches the data plane to dev (the server veth or lo) alone,
// or detaches it ("").
func (b *bench) setSanta(dev string) error {
	if dev == b.attached {
		return nil
	}
	if b.attached != "" {
		if err := b.d.Detach(b.attached); err != nil {
			return err
		}
		b.attached = ""
	}
	if dev == "" {
		return nil
	}
	return rig.InNetns(b.c.r.ServerNS(), func() error {
		att, err := b.d.Attach(dev)
		if err == nil && dev != "lo" && att.XDP != model.XDPNative {
			err = fmt.Errorf("XDP attached in %s mode, not native", att.XDP)
		}
		if err == nil {
			b.attached = dev
		}
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

// reportRatio prints the target's figure: Santa's server-side cost per
// reply with partial checksums over its cost with full ones, round by
// round (both cells ran within the same round, so under the same noise).
func reportRatio(name string, full, partial []sample) {
	xs := make([]float64, len(full))
	for i := range xs {
		xs[i] = partial[i].usPerReply() / full[i].usPerReply()
	}
	fmt.Printf("RESULT name=%s/santa/partial_over_full_us_per_reply value=%.3f unit=ratio range=%.3f..%.3f runs=%d\n",
		name, dp.MedianF(xs), slices.Min(xs), slices.Max(xs), len(xs))
}
