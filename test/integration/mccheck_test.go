package integration

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/mccheck"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// The linearizability check (internal/mccheck) of a real memcached from
// Debian behind the real santad: both of memcached's sockets attached
// and in one generation domain, and installers that follow the agent's
// protocol (docs/memcached.md, "Using it from santad") as fast as they
// can, racing the checker's writers: the generation, then memcached's
// value from a probe port, then a guarded rule answering it (a hit or a
// miss), replaced and deleted over and over.
const (
	mcCheckOps        = 150_000
	mcCheckDeadline   = 3 * time.Minute
	mcCheckKeys       = 64
	mcCheckInstallers = 4
	mcCheckWritePause = 2 * time.Millisecond
)

func TestMemcachedLinearizable(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("runs memcached and santad under load")
	}
	for _, v := range []struct {
		name       string
		udpWriters int
	}{{"tcp-writers", 0}, {"udp-writers", 1}} {
		t.Run(v.name, func(t *testing.T) {
			m := startMcRig(t, "mcl"+string(rune('a'+v.udpWriters)))
			ctx, stop := context.WithCancel(context.Background())
			cfg := m.checkConfig(t)
			cfg.UDPWriters = v.udpWriters
			installed := m.installers(t, ctx, cfg, mcCheckInstallers)
			rep, err := mccheck.Run(context.Background(), cfg)
			stop()
			inst := installed()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("installers: %s", inst)
			t.Logf("checker: %s", rep.String())
			st, err := m.c.MemcachedStats(m.udp)
			t.Logf("memcached stats: %+v %v", st, err)
			if len(rep.Violations) != 0 {
				t.Errorf("%d violations (the first above)", len(rep.Violations))
			}
			if rep.Ops < 100_000 {
				t.Errorf("%d operations in %v, want at least 100000", rep.Ops, rep.Elapsed)
			}
			if rep.KernelAnswered == 0 || inst.installed == 0 {
				t.Errorf("the kernel answered %d gets from %d rules installed: the check raced nothing", rep.KernelAnswered, inst.installed)
			}
			t.Logf("kernel share of UDP gets: %.1f %%", 100*rep.KernelShare())
		})
	}
}

// mcRig is memcached and santad in a namespace of their own, memcached's
// sockets attached and marked.
type mcRig struct {
	ns       *santadtest.Netns
	santad   *santadtest.Santad
	c        *client.Client // the test's
	addr     netip.AddrPort // memcached's TCP and UDP
	tcp, udp uint32         // their services
}

func startMcRig(t *testing.T, suffix string) *mcRig {
	t.Helper()
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Fatal("memcached is not installed (make test-deps)")
	}
	santadtest.SweepStale()
	ns, err := santadtest.NewNetns(santadtest.NetnsName(suffix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	dir := t.TempDir()
	bin, err := santadtest.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &mcRig{ns: ns, santad: santadtest.New(bin, ns, dir, santadtest.PinPath(suffix)),
		addr: netip.MustParseAddrPort("127.0.0.1:11211")}
	if err := m.santad.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.santad.Close(); err != nil {
			t.Error(err)
		}
	})
	port := strconv.Itoa(int(m.addr.Port()))
	mc := ns.Command(context.Background(), "memcached", "-U", port, "-p", port, "-l", m.addr.Addr().String(),
		"-m", "64", "-c", "256", "-t", "2", "-u", "nobody")
	mc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var mcErr strings.Builder
	mc.Stdout, mc.Stderr = &mcErr, &mcErr
	if err := mc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mc.Process.Kill() // nsenter execs it: the pid is memcached's
		mc.Wait()
	})
	if m.c, err = client.Dial(m.santad.Socket); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.c.Close() })
	// Its sockets, found without connecting: a connection accepted
	// before the listener is marked would hold the domain back.
	nsPath := netns.Named(ns.Name)
	var listeners, udps []procsock.Socket
	for deadline := time.Now().Add(5 * time.Second); len(listeners) == 0 || len(udps) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("memcached did not bind its sockets: %s", mcErr.String())
		}
		listeners, _ = procsock.ListeningTCP(nsPath, m.addr.Port(), m.addr.Addr())
		udps, _ = procsock.BoundUDP(nsPath, m.addr.Port(), m.addr.Addr())
	}
	m.tcp = m.attach(t, listeners[0].Inode, nil)
	m.udp = m.attach(t, udps[0].Inode, &m.tcp)
	return m
}

// attach attaches the socket of inode, taken from memcached, and marks
// it memcached's, in the domain of service *domain (nil: its own).
func (m *mcRig) attach(t *testing.T, inode uint64, domain *uint32) uint32 {
	t.Helper()
	pid, fd, err := procsock.Holder(inode)
	if err != nil {
		t.Fatal(err)
	}
	own, err := procsock.TakeFD(pid, fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(own)
	svc, err := m.c.AttachFD(own)
	if err != nil {
		t.Fatal(err)
	}
	if domain == nil {
		domain = &svc.ServiceID
	}
	if err := m.c.SetParser(svc.ServiceID, client.Parser{Kind: client.ParserMemcached, Domain: *domain}); err != nil {
		t.Fatal(err)
	}
	return svc.ServiceID
}

// checkConfig is a checker's run against the rig, counting the gets the
// kernel answered (the UDP service's Matched).
func (m *mcRig) checkConfig(t *testing.T) mccheck.Config {
	t.Helper()
	stats, err := client.Dial(m.santad.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stats.Close() })
	cfg := mccheck.DefaultConfig()
	cfg.Netns, cfg.TCP, cfg.UDP = m.ns.Name, m.addr, m.addr
	cfg.Keys, cfg.Ops, cfg.Deadline = mcCheckKeys, mcCheckOps, mcCheckDeadline
	cfg.WritePause = mcCheckWritePause
	cfg.KernelAnswered = func() (uint64, error) {
		st, err := stats.ServiceStats(m.udp)
		return st.Matched, err
	}
	return cfg
}

// installStats is what the installers did.
type installStats struct {
	installed, replaced, deleted, inFlight, misses, timeouts int64
}

func (s installStats) String() string {
	return "installed " + strconv.FormatInt(s.installed, 10) + " (replacing " + strconv.FormatInt(s.replaced, 10) +
		", of misses " + strconv.FormatInt(s.misses, 10) + "), deleted " + strconv.FormatInt(s.deleted, 10) +
		", skipped in flight " + strconv.FormatInt(s.inFlight, 10) + ", probe timeouts " + strconv.FormatInt(s.timeouts, 10)
}

// installers starts n installers, each over its share of the keys of
// cfg, until ctx is done; the function returned waits for them, fails
// the test on their errors and returns their counts.
func (m *mcRig) installers(t *testing.T, ctx context.Context, cfg mccheck.Config, n int) func() installStats {
	t.Helper()
	var wg sync.WaitGroup
	var counts [6]atomic.Int64
	errs := make(chan error, n)
	for i := range n {
		c, err := client.Dial(m.santad.Socket)
		if err != nil {
			t.Fatal(err)
		}
		var probe *net.UDPConn
		if err := m.ns.Do(func() (err error) {
			probe, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(m.addr))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		port := uint16(probe.LocalAddr().(*net.UDPAddr).Port)
		if err := c.SetLearning(m.udp, client.Learning{KeyOffset: 8, ProbePort: port, Enabled: true}); err != nil {
			t.Fatal(err)
		}
		in := &installer{m: m, c: c, probe: probe, rng: rand.New(rand.NewPCG(uint64(i), 7)), ids: map[string]uint32{}, counts: &counts}
		for k := i; k < cfg.Keys; k += n {
			in.keys = append(in.keys, cfg.Key(k))
		}
		wg.Go(func() {
			defer c.Close()
			defer probe.Close()
			errs <- in.run(ctx)
		})
	}
	return func() installStats {
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		return installStats{counts[0].Load(), counts[1].Load(), counts[2].Load(), counts[3].Load(), counts[4].Load(), counts[5].Load()}
	}
}

// installer follows the agent's protocol for its keys, in a loop.
type installer struct {
	m      *mcRig
	c      *client.Client
	probe  *net.UDPConn
	rng    *rand.Rand
	keys   []string
	ids    map[string]uint32 // its rule of each key
	counts *[6]atomic.Int64  // installStats' fields, in order
	reqID  uint16
}

func (in *installer) run(ctx context.Context) error {
	for ctx.Err() == nil {
		key := in.keys[in.rng.IntN(len(in.keys))]
		if id, ok := in.ids[key]; ok && in.rng.IntN(8) == 0 {
			if err := in.c.DeleteRules(in.m.udp, []uint32{id}); err != nil {
				return err
			}
			delete(in.ids, key)
			in.counts[2].Add(1)
			continue
		}
		if err := in.install(key); err != nil {
			return err
		}
	}
	return nil
}

// install reads key's generation, then its value from memcached, then
// installs (or replaces) the rule answering a get of it with that
// value, guarded at that generation.
func (in *installer) install(key string) error {
	g, err := in.c.Generation(in.m.udp, []byte(key))
	if err != nil {
		return err
	}
	if g.InFlight || g.Epoch == 0 {
		in.counts[3].Add(1)
		return nil
	}
	in.reqID++
	frame := []byte{byte(in.reqID >> 8), byte(in.reqID), 0, 0, 0, 1, 0, 0}
	got, err := santadtest.Ask(in.probe, append(frame, "get "+key+"\r\n"...), time.Second)
	if errors.Is(err, syscall.EAGAIN) || isTimeout(err) {
		in.counts[5].Add(1)
		return nil
	}
	if err != nil {
		return err
	}
	if len(got) < 8 || string(got[:8]) != string(frame) {
		return nil // a late reply to an earlier probe
	}
	value := got[8:]
	if string(value) == "END\r\n" {
		in.counts[4].Add(1)
	}
	request := "get " + key + "\r\n"
	r := rule.Rule{
		Condition:  rule.ExactLength(rule.Condition{Offset: 8, Pattern: []byte(request)}, uint16(8+len(request))),
		Processors: []rule.Processor{rule.Copy(0, 2, 0), rule.Put(2, []byte{0, 0, 0, 1, 0, 0}), rule.Put(8, value)},
		ReplyLen:   uint16(8 + len(value)),
	}
	guard := g.Guard([]byte(key), 0)
	if id, ok := in.ids[key]; ok {
		if err := in.c.ReplaceRules(in.m.udp, []client.RuleEntry{{RuleID: id, Rule: r, Guard: guard}}); err != nil {
			return err
		}
		in.counts[1].Add(1)
	} else {
		ids, err := in.c.AddGuardedRules(in.m.udp, []client.GuardedRule{{Rule: r, Guard: guard}})
		if err != nil {
			return err
		}
		in.ids[key] = ids[0]
	}
	in.counts[0].Add(1)
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
