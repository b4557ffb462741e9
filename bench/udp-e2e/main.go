// Command udp-e2e compares Santa with a userspace UDP responder end to end
// in the two-namespace veth rig (bench/rig.sh): the same DNS rules, the same
// request mixes, the same replies. A C load client in the client namespace
// (pinned to -client-cpu) sends bounded bursts with sendmmsg and counts
// replies; the server side is either the C responder alone (recvmmsg /
// sendmmsg, pinned to -server-cpu) or Santa's XDP program on the server veth
// with the responder still running to catch misses. Threaded NAPI on the
// server veth, pinned to the server CPU, charges the receive path to it.
// Modes are interleaved A B A B over rounds; RESULT lines give medians and
// ranges of replies/s and server-core µs per reply (from /proc/stat).
//
// Needs root, gcc, iproute2, ethtool. Everything it creates (rig, processes,
// temp files) is removed on exit.
package main

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/xdppass"
	"github.com/santa-offload/santa/rule"
)

//go:embed csrc/responder.c
var responderSrc []byte

//go:embed csrc/client.c
var clientSrc []byte

const port = 5353

type config struct {
	r                    rig.Rig
	nrules               int
	sizes                []int
	mixes                []string
	rounds               int
	duration             time.Duration
	max                  int
	batch, window        int
	serverCPU, clientCPU int
	respBatch            int
	modes                []string
	client               string
	rates                []float64
}

func main() {
	var c config
	var sizes, mixes string
	flag.StringVar(&c.r.Name, "rig", "sbe2e", "rig name (namespaces NAME-srv, NAME-cli)")
	flag.StringVar(&c.r.Script, "rig-script", "bench/rig.sh", "path of rig.sh")
	flag.IntVar(&c.nrules, "rules", 100000, "DNS rules installed (Santa) and loaded (responder)")
	flag.StringVar(&sizes, "sizes", "512", "reply payload sizes")
	flag.StringVar(&mixes, "mixes", "hot,uniform", "request mixes: hot (1024 names), uniform (all names), zipf (all names, Zipf s=0.99)")
	flag.IntVar(&c.rounds, "rounds", 3, "interleaved rounds (A B per round, order alternating)")
	flag.DurationVar(&c.duration, "duration", 2*time.Second, "send time per run")
	flag.IntVar(&c.max, "max", 5000000, "at most this many requests per run")
	flag.IntVar(&c.batch, "batch", 32, "client sendmmsg batch")
	flag.IntVar(&c.window, "window", 256, "client: at most this many unanswered requests")
	flag.IntVar(&c.serverCPU, "server-cpu", 1, "server CPU (responder, server veth NAPI)")
	flag.IntVar(&c.clientCPU, "client-cpu", 0, "client CPU (load client, client veth NAPI, this process)")
	flag.IntVar(&c.respBatch, "responder-batch", 64, "responder recvmmsg/sendmmsg batch")
	modes := flag.String("modes", "user,santa", "modes to run: user (responder alone), santa (XDP + responder)")
	flag.StringVar(&c.client, "client", "c", "load client: c (sendmmsg, closed loop with a window) or xdp (bench/gen, open loop)")
	rates := flag.String("rates", "0", "-client xdp: offered loads, requests/s (0: as fast as it sends)")
	flag.Parse()
	c.modes = strings.Split(*modes, ",")
	if c.client != "c" && c.client != "xdp" {
		fatal(fmt.Errorf("-client %q: want c or xdp", c.client))
	}
	for _, r := range strings.Split(*rates, ",") {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v < 0 || (v > 0 && c.client != "xdp") {
			fatal(fmt.Errorf("-rates: %q is not an offered load (requests/s, 0 for open loop; other loads need -client xdp)", r))
		}
		c.rates = append(c.rates, v)
	}
	var err error
	if c.sizes, err = dp.ParseInts(sizes); err != nil {
		fatal(err)
	}
	c.mixes = strings.Split(mixes, ",")

	code := 0
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "udp-e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func run(c config) error {
	return c.r.Run("e2e", c.serverCPU, c.clientCPU, func(ctx context.Context, tmp string) error {
		responder, client, err := buildC(tmp)
		if err != nil {
			return err
		}
		// veth delivers XDP_TX frames only to a peer that runs XDP; the
		// generator brings its own (the reply counter).
		if c.client == "c" {
			var pass link.Link
			if err := rig.InNetns(c.r.ClientNS(), func() error {
				var err error
				pass, err = xdppass.Attach(c.r.ClientDev())
				return err
			}); err != nil {
				return err
			}
			defer pass.Close()
		}
		rng := rand.New(rand.NewPCG(7, 7))
		for _, size := range c.sizes {
			if err := runSize(ctx, c, rng, tmp, responder, client, size); err != nil {
				return err
			}
		}
		return nil
	})
}

type sample struct {
	repliesPerSec float64 // good replies that reached the client
	servedPerSec  float64 // replies sent by the server (Santa and responder)
	serverUSPer   float64 // server CPU busy µs per good reply
	serverBusyPct float64
	clientBusyPct float64
	sent, good    uint64
	stalls        uint64
	xdpAnswered   uint64  // Santa: answered by the data plane (XDP or TC)
	userAnswered  uint64  // responder: answered
	taskUSPer     float64 // responder + server NAPI kthreads: CPU µs per good reply
	xdpFallback   uint64  // Santa: matched in XDP but left to TC
}

func runSize(ctx context.Context, c config, rng *rand.Rand, tmp, responderBin, clientBin string, size int) error {
	srvNS, srvDev := c.r.ServerNS(), c.r.ServerDev()
	names := pkttest.Name
	// The rule set, for the responder; Santa gets the same rules.
	rulesFile := filepath.Join(tmp, fmt.Sprintf("rules-%d.bin", size))
	if err := writeRules(rulesFile, c.nrules, size, names); err != nil {
		return err
	}
	// The service socket, bound in the server namespace; the responder
	// inherits it as fd 3 and Santa registers the very same socket.
	var sockFD int
	if err := rig.InNetns(srvNS, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 32<<20)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{10, 77, 0, 1}}); err != nil {
			unix.Close(fd)
			return err
		}
		sockFD = fd
		return nil
	}); err != nil {
		return fmt.Errorf("binding the service socket: %w", err)
	}
	sock := os.NewFile(uintptr(sockFD), "service")
	defer sock.Close()

	resp, err := startResponder(responderBin, rulesFile, c.serverCPU, c.respBatch, sock)
	if err != nil {
		return err
	}
	defer resp.stop()

	d, svc, err := installSanta(srvNS, sockFD, c.nrules, size, names)
	if err != nil {
		return err
	}
	defer d.Close()
	id := fmt.Sprintf("client=%s/rules=%s/reply=%d", c.client, dp.Human(c.nrules), size)

	attached := false
	setMode := func(santa bool) error {
		if santa == attached {
			return nil
		}
		if !santa {
			attached = false
			return d.Detach(srvDev)
		}
		return rig.InNetns(srvNS, func() error {
			att, err := d.Attach(srvDev)
			if err != nil {
				return err
			}
			if att.XDP != model.XDPNative {
				return fmt.Errorf("XDP attached in %s mode, not native", att.XDP)
			}
			attached = true
			return nil
		})
	}
	defer setMode(false)

	runOnce := func(mode string, send sender, dur time.Duration) (sample, error) {
		if err := setMode(mode == "santa"); err != nil {
			return sample{}, err
		}
		time.Sleep(50 * time.Millisecond)
		tasks := append([]int{resp.cmd.Process.Pid}, rig.NapiThreads(srvDev)...)
		before, err := snapshot(resp, d, svc, tasks)
		if err != nil {
			return sample{}, err
		}
		out, err := send(dur)
		if err != nil {
			return sample{}, err
		}
		after, err := snapshot(resp, d, svc, tasks)
		if err != nil {
			return sample{}, err
		}
		smp := toSample(out, after.responder["answered"]-before.responder["answered"],
			after.service.Matched-before.service.Matched)
		smp.xdpFallback = after.service.Fallback() - before.service.Fallback()
		if smp.good > 0 {
			smp.taskUSPer = float64(after.taskNS-before.taskNS) / 1e3 / float64(smp.good)
		}
		return smp, nil
	}

	// One mix after the other (a generator owns the client veth's XDP
	// hook while it is open), the modes interleaved within each.
	got := map[string][]sample{}
	var cells []string
	for _, mix := range c.mixes {
		load, done, err := openLoad(ctx, c, mix, rng, tmp, clientBin, size)
		if err != nil {
			return fmt.Errorf("mix %s: %w", mix, err)
		}
		for _, rate := range c.rates {
			cell := "mix=" + mix
			if c.client == "xdp" {
				cell += "/rate=" + gen.RateName(rate)
			}
			cells = append(cells, cell)
			if err = runCell(ctx, c, id, cell, load(rate), runOnce, got); err != nil {
				break
			}
		}
		done()
		if err != nil {
			return err
		}
	}

	for _, cell := range cells {
		for _, mode := range c.modes {
			ss := got[cell+"/"+mode]
			name := fmt.Sprintf("e2e/%s/%s/mode=%s", id, cell, mode)
			dp.Summary(name+"/replies_per_s", ss, func(s sample) float64 { return s.repliesPerSec }, "replies/s")
			dp.Summary(name+"/served_per_s", ss, func(s sample) float64 { return s.servedPerSec }, "replies/s")
			dp.Summary(name+"/server_us_per_reply", ss, func(s sample) float64 { return s.serverUSPer }, "us/reply")
			dp.Summary(name+"/server_task_us_per_reply", ss, func(s sample) float64 { return s.taskUSPer }, "us/reply")
			dp.Summary(name+"/server_cpu_busy", ss, func(s sample) float64 { return s.serverBusyPct }, "%")
			dp.Summary(name+"/client_cpu_busy", ss, func(s sample) float64 { return s.clientBusyPct }, "%")
			dp.Summary(name+"/answered_by_santa", ss, func(s sample) float64 {
				return 100 * float64(s.xdpAnswered) / max(1, float64(s.xdpAnswered+s.userAnswered))
			}, "%")
			if mode == "santa" {
				dp.Summary(name+"/santa_answers_left_to_tc", ss, func(s sample) float64 {
					return 100 * float64(s.xdpFallback) / max(1, float64(s.xdpAnswered))
				}, "%")
			}
		}
		u := median(got[cell+"/user"], func(s sample) float64 { return s.serverUSPer })
		s := median(got[cell+"/santa"], func(s sample) float64 { return s.serverUSPer })
		if u > 0 {
			result(fmt.Sprintf("e2e/%s/%s/server_cost_ratio_santa_vs_user", id, cell), s/u, "ratio")
		}
		u = median(got[cell+"/user"], func(s sample) float64 { return s.taskUSPer })
		s = median(got[cell+"/santa"], func(s sample) float64 { return s.taskUSPer })
		if u > 0 {
			result(fmt.Sprintf("e2e/%s/%s/server_task_cost_ratio_santa_vs_user", id, cell), s/u, "ratio")
		}
	}
	return nil
}

// runCell warms both paths up (caches, NAPI threads, socket buffers), then
// runs the modes A B B A ... for c.rounds rounds.
func runCell(ctx context.Context, c config, id, cell string, send sender,
	runOnce func(string, sender, time.Duration) (sample, error), got map[string][]sample) error {
	for _, mode := range c.modes {
		if _, err := runOnce(mode, send, 300*time.Millisecond); err != nil {
			return fmt.Errorf("warm-up (%s/%s): %w", cell, mode, err)
		}
	}
	for round := range c.rounds {
		order := slices.Clone(c.modes)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			s, err := runOnce(mode, send, c.duration)
			if err != nil {
				return fmt.Errorf("%s/%s round %d: %w", cell, mode, round, err)
			}
			key := cell + "/" + mode
			got[key] = append(got[key], s)
			fmt.Fprintf(os.Stderr, "  %s round %d %-14s %9.0f replies/s %7.2f µs/reply server (tasks %7.2f, busy %5.1f%%), client busy %5.1f%%, sent %d good %d santa %d (fallback to TC %d) user %d stalls %d\n",
				id, round, key, s.repliesPerSec, s.serverUSPer, s.taskUSPer, s.serverBusyPct, s.clientBusyPct, s.sent, s.good, s.xdpAnswered, s.xdpFallback, s.userAnswered, s.stalls)
		}
	}
	return nil
}

func toSample(r loadRun, userAnswered, xdpAnswered uint64) sample {
	return sample{
		sent: r.Sent, good: r.Good, stalls: r.stalls,
		xdpAnswered: xdpAnswered, userAnswered: userAnswered,
		repliesPerSec: r.PerSec(r.Good),
		servedPerSec:  r.PerSec(xdpAnswered + userAnswered),
		serverUSPer:   r.ServerUSPer(r.Good),
		serverBusyPct: r.ServerBusyPct(),
		clientBusyPct: r.ClientBusyPct(),
	}
}

// installSanta opens a data plane in the server's namespace ns, whose
// addresses it answers for, and installs the rule set on the socket.
func installSanta(ns string, fd, n, size int, names func(int) string) (*datapath.Datapath, model.ServiceID, error) {
	maxRules := uint32(1024)
	for maxRules < uint32(2*n) {
		maxRules <<= 1
	}
	var d *datapath.Datapath
	err := rig.InNetns(ns, func() (err error) {
		d, err = datapath.Open(datapath.Options{NoPin: true, MaxRules: maxRules, MaxServices: 16})
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	svc, err := d.AddSocket(fd)
	if err != nil {
		d.Close()
		return nil, 0, err
	}
	t0 := time.Now()
	const batch = 50000
	for start := 0; start < n; start += batch {
		rs := make([]rule.Rule, 0, batch)
		for i := start; i < min(n, start+batch); i++ {
			r, err := pkttest.SizedDNSRule(names(i), size)
			if err != nil {
				d.Close()
				return nil, 0, err
			}
			rs = append(rs, r)
		}
		if _, err := d.AddRules(svc, rs); err != nil {
			d.Close()
			return nil, 0, err
		}
	}
	fmt.Fprintf(os.Stderr, "  santa: %d rules (%d-byte replies) installed in %v\n", n, size, time.Since(t0).Round(time.Millisecond))
	return d, svc, nil
}

// writeRules writes the responder's rule file: "SNTR", count, then per rule
// u16 cond offset, u16 cond length, u16 reply length, u16 0, cond, reply.
func writeRules(path string, n, size int, names func(int) string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	w.WriteString("SNTR")
	binary.Write(w, binary.LittleEndian, uint32(n))
	for i := range n {
		q := pkttest.DNSQuery(0, names(i))
		reply, err := pkttest.SizedDNSReply(names(i), size)
		if err != nil {
			f.Close()
			return err
		}
		binary.Write(w, binary.LittleEndian, [4]uint16{2, uint16(len(q) - 2), uint16(len(reply)), 0})
		w.Write(q[2:])
		w.Write(reply)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeRequests writes the client's request file: "SNTQ", count, then per
// request u16 length and the query (transaction id 0; the client sets it).
func writeRequests(path string, picks []int, names func(int) string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	w.WriteString("SNTQ")
	binary.Write(w, binary.LittleEndian, uint32(len(picks)))
	for _, n := range picks {
		q := pkttest.DNSQuery(0, names(n))
		binary.Write(w, binary.LittleEndian, uint16(len(q)))
		w.Write(q)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type responderProc struct {
	cmd   *exec.Cmd
	lines chan string
}

func startResponder(bin, rulesFile string, cpu, batch int, sock *os.File) (*responderProc, error) {
	cmd := exec.Command(bin, rulesFile, fmt.Sprint(cpu), fmt.Sprint(batch))
	cmd.ExtraFiles = []*os.File{sock} // fd 3
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &responderProc{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	select {
	case l, ok := <-p.lines:
		if !ok || l != "ready" {
			p.stop()
			return nil, fmt.Errorf("responder did not start (%q)", l)
		}
	case <-time.After(60 * time.Second):
		p.stop()
		return nil, errors.New("responder did not start within 60 s")
	}
	return p, nil
}

// counters asks the responder for its counters (SIGUSR1).
func (p *responderProc) counters() (map[string]uint64, error) {
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return nil, err
	}
	select {
	case l, ok := <-p.lines:
		if !ok {
			return nil, errors.New("responder exited")
		}
		return keyValues(l), nil
	case <-time.After(5 * time.Second):
		return nil, errors.New("responder did not report its counters")
	}
}

func (p *responderProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// runClient runs the C client for dur and reads its one line of counters.
func runClient(ctx context.Context, bin, ns, reqFile string, size int, c config, dur time.Duration) (loadRun, error) {
	ctx, cancel := context.WithTimeout(ctx, dur+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, bin, rig.ServerIPv4, fmt.Sprint(port), reqFile,
		fmt.Sprint(size), fmt.Sprint(c.clientCPU), fmt.Sprint(dur.Milliseconds()), fmt.Sprint(c.max),
		fmt.Sprint(c.batch), fmt.Sprint(c.window))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return loadRun{}, fmt.Errorf("client: %w", err)
	}
	kv := keyValues(strings.TrimSpace(string(out)))
	if kv["hz"] != rig.UserHZ || kv["send_ns"] == 0 {
		return loadRun{}, fmt.Errorf("client output incomplete or not in %d Hz ticks: %s", rig.UserHZ, out)
	}
	cpu := func(n int, what string) uint64 { return kv[fmt.Sprintf("cpu%d_%s", n, what)] }
	return loadRun{Sample: rig.Sample{
		Took: time.Duration(kv["send_ns"]), Sent: kv["sent"], Replies: kv["replies"], Good: kv["good"],
		CPUUse: rig.CPUUse{ClientBusy: cpu(c.clientCPU, "busy"), ClientTotal: cpu(c.clientCPU, "total"),
			ServerBusy: cpu(c.serverCPU, "busy"), ServerTotal: cpu(c.serverCPU, "total")},
	}, stalls: kv["stalls"]}, nil
}

func keyValues(line string) map[string]uint64 {
	out := map[string]uint64{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out
}

// counters is what a run is measured by, read before and after it.
type counters struct {
	responder map[string]uint64  // the userspace responder's own counts
	service   model.ServiceStats // the data plane's, for the service
	taskNS    uint64             // CPU time of the responder and the server's NAPI threads
}

func snapshot(resp *responderProc, d *datapath.Datapath, svc model.ServiceID, tasks []int) (counters, error) {
	var c counters
	var err error
	if c.responder, err = resp.counters(); err != nil {
		return c, err
	}
	if c.service, err = d.ServiceStats(svc); err != nil {
		return c, err
	}
	c.taskNS, err = rig.TaskTime(tasks)
	return c, err
}

func buildC(dir string) (responder, client string, err error) {
	for _, p := range []struct {
		name string
		src  []byte
	}{{"responder", responderSrc}, {"client", clientSrc}} {
		src := filepath.Join(dir, p.name+".c")
		if err := os.WriteFile(src, p.src, 0o644); err != nil {
			return "", "", err
		}
		out, err := exec.Command("gcc", "-O2", "-Wall", "-o", filepath.Join(dir, p.name), src).CombinedOutput()
		if err != nil {
			return "", "", fmt.Errorf("gcc %s: %v\n%s", p.name, err, out)
		}
	}
	return filepath.Join(dir, "responder"), filepath.Join(dir, "client"), nil
}

func median(ss []sample, f func(sample) float64) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = f(s)
	}
	return dp.MedianF(xs)
}

func result(name string, v float64, unit string) {
	fmt.Printf("RESULT name=%s value=%s unit=%s\n", name, num(v), unit)
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "udp-e2e:", err)
	os.Exit(1)
}
