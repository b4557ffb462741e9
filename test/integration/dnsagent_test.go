package integration

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/dnsload"
	"github.com/santa-offload/santa/internal/dnstest"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/offload/agent"
	"github.com/santa-offload/santa/internal/popularity"
	"github.com/santa-offload/santa/internal/santadtest"
)

// The agent's end-to-end test: a real DNS server from Debian (BIND with
// two threads, Knot with two UDP workers, NSD with two servers) in the
// rig's server namespace, santad serving the rig's veth there, and the
// offload agent (internal/offload/agent, as `santa-offload dns` runs it)
// next to them; clients in the client namespace check every reply byte
// for byte against the server's own, captured before Santa was there.
const (
	agentNames     = 2000                   // names in the zone
	agentAsked     = 300                    // names the clients ask for, in every shape
	agentReplies   = 1_000_000              // checked replies of the main run, per server
	agentMaxRules  = 400                    // the agent's top-N
	agentFreshness = time.Second            // the documented bound on old answers after a reload
	agentLearnWait = 15 * time.Second       // traffic until the agent must have offloaded
	agentRunLimit  = 120 * time.Second      // bound on one load run
	agentWarm      = 200 * time.Millisecond // a load runs this long before a change is made
)

var agentAddrs = []netip.Addr{netip.MustParseAddr(serverIPv4), netip.MustParseAddr(serverIPv6)}

// agentRig is one server under test with santad and the agent.
type agentRig struct {
	r      *rig
	santad *santadtest.Santad
	server *dnstest.Server
	forms  []dnsload.Form
	tables map[netip.Addr][]dnsload.Expect // the server's own replies, per address
	stop   func()                          // stops the agent
	agentc chan error                      // its Run's result
	logs   *lockedBuffer
}

func TestDNSAgent(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("starts real DNS servers and loads them")
	}
	for i, k := range dnstest.Kinds {
		t.Run(string(k), func(t *testing.T) {
			if err := dnstest.Available(k); err != nil {
				t.Skip(err)
			}
			a := startAgentRig(t, k, string(rune('p'+i)))
			a.waitOffloaded(t)
			a.steady(t)
			a.unmatchedShapes(t)
			a.zoneChange(t)
			a.shifting(t)
			a.restart(t)
			a.finish(t)
		})
	}
}

// startAgentRig brings up the rig, santad on its server veth, the server,
// the clients' expected replies, and the agent.
func startAgentRig(t *testing.T, k dnstest.Kind, suffix string) *agentRig {
	t.Helper()
	a := &agentRig{r: newRig(t, suffix), tables: map[netip.Addr][]dnsload.Expect{}, logs: &lockedBuffer{}}
	attachXDPPass(t, a.r.cli, a.r.cliDev)
	dir := t.TempDir()
	bin, err := santadtest.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The veth only: over lo, in the server namespace, the test asks the
	// server itself (recapture).
	a.santad = santadtest.New(bin, &santadtest.Netns{Name: a.r.srv}, dir, santadtest.PinPath("agent"+suffix),
		"-interfaces", a.r.srvDev)
	if err := a.santad.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.santad.Close(); err != nil {
			t.Error(err)
		}
	})
	a.server, err = dnstest.Start(dnstest.Config{Kind: k, Netns: a.r.srv, Dir: t.TempDir(), Addrs: agentAddrs,
		Threads: 2, Names: agentNames})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.server.Stop(); err != nil {
			t.Error(err)
		}
	})
	a.forms = dnsload.Forms(dnstest.Questions(agentAsked), dnsload.Shapes)
	for _, addr := range agentAddrs {
		a.tables[addr] = a.capture(t, addr)
	}
	a.startAgent(t)
	return a
}

// capture is the server's reply to every form at addr, asked from the
// client namespace.
func (a *agentRig) capture(t *testing.T, addr netip.Addr) []dnsload.Expect {
	t.Helper()
	conn, err := dnsload.Dial(a.r.cli, netip.AddrPortFrom(addr, 53))
	return a.captureOn(t, conn, err, 4)
}

// captureOn captures every form's reply over conn (dialled with err),
// asking each tries times, and closes it.
func (a *agentRig) captureOn(t *testing.T, conn *net.UDPConn, err error, tries int) []dnsload.Expect {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	table, err := dnsload.Capture(conn, a.forms, tries)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// startAgent runs the agent as `santa-offload dns` would, in this process:
// its probe socket and its view of the server in the server namespace.
func (a *agentRig) startAgent(t *testing.T) {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.Netns = netns.Named(a.r.srv)
	cfg.Socket = a.santad.Socket
	cfg.UniformAnswers = true
	cfg.MaxRules = agentMaxRules
	cfg.Log = newTestLogger(a.logs)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.agentc = make(chan error, 1)
	go func() { a.agentc <- agent.Run(ctx, cfg) }()
	a.stop = cancel
	t.Cleanup(func() {
		cancel()
		select {
		case <-a.agentc:
		case <-time.After(10 * time.Second):
			t.Error("the agent did not stop within 10 s")
		}
	})
}

// load runs a checked load to addr and fails the test on any wrong reply.
func (a *agentRig) load(t *testing.T, c dnsload.Config) dnsload.Result {
	t.Helper()
	c.Netns, c.Forms = a.r.cli, a.forms
	if c.Expect == nil {
		c.Expect = a.tables[c.Server.Addr()]
	}
	if c.Duration == 0 {
		c.Duration = agentRunLimit
	}
	res, err := dnsload.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	a.checkResult(t, fmt.Sprintf("load to %v", c.Server), res)
	return res
}

// checkResult fails the test on a wrong, doubled or stale reply. Timeouts
// are not Santa's answers (a server starved of its CPU overflows its
// socket); they are reported, and fail only above 1 %.
func (a *agentRig) checkResult(t *testing.T, what string, res dnsload.Result) {
	t.Helper()
	t.Logf("%s: %d replies in %v (%.0f/s), %d timeouts", what, res.Replies, res.Elapsed.Round(time.Millisecond),
		float64(res.Replies)/res.Elapsed.Seconds(), res.Timeouts)
	if res.Mismatches+res.Unexpected+res.Stale != 0 || res.Timeouts*100 > res.Sent {
		t.Errorf("%s: %s\nagent log:\n%s", what, res.Report(a.forms), a.logs.String())
	}
}

func zipf(s float64) popularity.Popularity { return popularity.Popularity{Zipf: true, S: s} }

// stats is what santad says about the server's services now.
type agentStats struct {
	services, rules  int
	cookies          map[uint64]bool
	matched, passed  uint64
	managers         []string
	rulesByService   map[uint32]int
	patternsWithName map[string]bool // qnames with a rule, lower-case as the rules hold them
}

func (a *agentRig) stats(t *testing.T) agentStats {
	t.Helper()
	c, err := client.Dial(a.santad.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	svcs, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	s := agentStats{rulesByService: map[uint32]int{}, cookies: map[uint64]bool{}}
	for _, sv := range svcs {
		if sv.Port != 53 {
			continue
		}
		st, err := c.ServiceStats(sv.ServiceID)
		if err != nil {
			t.Fatal(err)
		}
		s.services++
		s.rules += int(st.Rules)
		s.matched += st.Matched
		s.passed += st.Passed
		s.managers = append(s.managers, sv.Manager)
		s.rulesByService[sv.ServiceID] = int(st.Rules)
		s.cookies[sv.Cookie] = true
	}
	return s
}

// waitOffloaded sends Zipf traffic until the agent has offloaded the hot
// forms on every socket of the server: both addresses, every thread's.
func (a *agentRig) waitOffloaded(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(agentLearnWait)
	for {
		for _, addr := range agentAddrs {
			a.load(t, dnsload.Config{Server: netip.AddrPortFrom(addr, 53), Popularity: zipf(1), Count: 20000, Seed: 1})
		}
		s := a.stats(t)
		full := s.services >= 2
		for _, n := range s.rulesByService {
			full = full && n > 0
		}
		if full {
			t.Logf("offloaded after traffic for %v: %d services, %d rules, managers %v",
				agentLearnWait-time.Until(deadline), s.services, s.rules, s.managers)
			for _, m := range s.managers {
				if m != agent.ClientName {
					t.Errorf("a service's manager is %q, not the agent", m)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v of traffic: %d services, rules %v\nagent log:\n%s", agentLearnWait, s.services,
				s.rulesByService, a.logs.String())
		}
	}
}

// steady: a million checked replies over IPv4, the kernel answering most
// of them; then IPv6.
func (a *agentRig) steady(t *testing.T) {
	t.Helper()
	before := a.stats(t)
	a.load(t, dnsload.Config{Server: netip.AddrPortFrom(agentAddrs[0], 53), Popularity: zipf(1.2),
		Count: agentReplies, Seed: 2})
	a.load(t, dnsload.Config{Server: netip.AddrPortFrom(agentAddrs[1], 53), Popularity: zipf(1.2),
		Count: agentReplies / 10, Seed: 3})
	after := a.stats(t)
	matched, passed := after.matched-before.matched, after.passed-before.passed
	t.Logf("steady: kernel answered %d, server %d (%.1f %%)", matched, passed, 100*float64(matched)/float64(matched+passed))
	// Zipf(1.2) over the forms with the hot set offloaded: most by far.
	if matched < 2*passed {
		t.Errorf("the kernel answered %d and the server %d: the hot set is not offloaded", matched, passed)
	}
}

// unmatchedShapes: the shapes the agent must never offload (a cookie, a
// trailing byte it cannot check) or that it has not learned are asked
// uniformly, checked against the server's own replies; none of a cookie's
// forms has a rule.
func (a *agentRig) unmatchedShapes(t *testing.T) {
	t.Helper()
	a.load(t, dnsload.Config{Server: netip.AddrPortFrom(agentAddrs[0], 53), Count: 100000, Seed: 4})
	for id, e := range a.rules(t) {
		for _, f := range a.forms {
			if f.Shape == dnsload.Cookie && bytes.Equal(e.Rule.Condition.Pattern, f.Bytes) {
				t.Errorf("service %d has rule %d for a query with an EDNS cookie", id, e.RuleID)
			}
		}
	}
}

// rules are the rules of every service santad has now, by service.
func (a *agentRig) rules(t *testing.T) iter.Seq2[uint32, client.RuleEntry] {
	t.Helper()
	c, err := client.Dial(a.santad.Socket)
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	return func(yield func(uint32, client.RuleEntry) bool) {
		defer c.Close()
		for _, sv := range svcs {
			for e, err := range c.Rules(sv.ServiceID) {
				if err != nil {
					t.Fatal(err)
				}
				if !yield(sv.ServiceID, e) {
					return
				}
			}
		}
	}
}

// zoneChange: the hottest name's address changes and the zone is reloaded
// while queries flow; no old answer may arrive later than agentFreshness
// after the reload was complete.
func (a *agentRig) zoneChange(t *testing.T) {
	t.Helper()
	addr := agentAddrs[0]
	l, err := dnsload.Start(context.Background(), dnsload.Config{Netns: a.r.cli, Server: netip.AddrPortFrom(addr, 53),
		Forms: a.forms, Expect: a.tables[addr], Popularity: zipf(1.2), Count: 1 << 30, Duration: 4 * time.Second,
		StaleAfter: agentFreshness, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(agentWarm)
	hot := a.forms[0].Question.Name
	label := strings.TrimSuffix(hot, "."+strings.TrimSuffix(dnstest.Origin, "."))
	l.BeginChange()
	done, err := a.server.Update(dnstest.Origin, func(z *dnstest.Zone) { z.Set(label, "A", "10.99.99.99") })
	if err != nil {
		t.Fatal(err)
	}
	next := map[netip.Addr][]dnsload.Expect{}
	for _, ad := range agentAddrs {
		next[ad] = a.recapture(t, ad)
	}
	if err := l.EndChange(next[addr], done); err != nil {
		t.Fatal(err)
	}
	res, err := l.Wait()
	if err != nil {
		t.Fatal(err)
	}
	a.checkResult(t, "zone change", res)
	changed := 0
	for i := range a.forms {
		if !next[addr][i].Equal(a.tables[addr][i]) {
			changed++
		}
	}
	if changed == 0 {
		t.Fatalf("the change of %s changed no form's reply", hot)
	}
	if res.OldReplies == 0 {
		t.Errorf("no old replies at all: the change of %s was not seen under load", hot)
	}
	t.Logf("zone change of %s: %d old replies, the last %v after the reload was complete (bound %v)",
		hot, res.OldReplies, res.LastOld.Sub(done).Round(time.Millisecond), agentFreshness)
	a.tables = next
}

// recapture is the server's own reply to every form now, asked inside the
// server namespace over lo, which santad does not serve here: the
// server's truth, whatever the kernel answers on the veth.
func (a *agentRig) recapture(t *testing.T, addr netip.Addr) []dnsload.Expect {
	t.Helper()
	conn, err := a.server.Dial(addr)
	return a.captureOn(t, conn, err, 2)
}

// shifting: the hot set changes completely halfway through a run; every
// reply stays right and the new hot forms end up offloaded.
func (a *agentRig) shifting(t *testing.T) {
	t.Helper()
	a.load(t, dnsload.Config{Server: netip.AddrPortFrom(agentAddrs[0], 53), Popularity: zipf(1.2), Shift: true,
		Count: 600000, Seed: 6})
	// The second half's hottest form in dnsperf's shape (form n/2 takes
	// form 0's popularity, n/2+1 form 1's...).
	hot := a.forms[len(a.forms)/2]
	for _, f := range a.forms[len(a.forms)/2:] {
		if f.Shape == dnsload.RD {
			hot = f
			break
		}
	}
	deadline := time.Now().Add(agentLearnWait)
	for !a.hasRule(t, hot.Bytes) {
		if time.Now().After(deadline) {
			t.Fatalf("the new hottest form %q has no rule %v after the shift\nagent log:\n%s", hot.Question.Name,
				agentLearnWait, a.logs.String())
		}
		a.load(t, dnsload.Config{Server: netip.AddrPortFrom(agentAddrs[0], 53), Popularity: zipf(1.2), Shift: true,
			Count: 20000, Seed: 7})
	}
}

func (a *agentRig) hasRule(t *testing.T, pattern []byte) bool {
	t.Helper()
	for _, e := range a.rules(t) {
		if bytes.Equal(e.Rule.Condition.Pattern, pattern) {
			return true
		}
	}
	return false
}

// restart: the server restarts while queries flow; no wrong answer at any
// point (timeouts while it is down are expected, and SERVFAIL from BIND
// while it loads its zones: the server's own, never offloaded), and the
// agent attaches the new sockets and offloads again.
func (a *agentRig) restart(t *testing.T) {
	t.Helper()
	addr := agentAddrs[0]
	var wg sync.WaitGroup
	var res dnsload.Result
	var loadErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, loadErr = dnsload.Run(context.Background(), dnsload.Config{Netns: a.r.cli, Server: netip.AddrPortFrom(addr, 53),
			Forms: a.forms, Expect: a.tables[addr], Popularity: zipf(1.2), Count: 1 << 30, Duration: 5 * time.Second,
			Timeout: 200 * time.Millisecond, Seed: 8, Restarting: true})
	}()
	time.Sleep(time.Second)
	before := a.stats(t)
	if err := a.server.Restart(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	t.Logf("restart under load: %d replies, %d timeouts and %d port-unreachable errors while the server was down, %d SERVFAIL while it started",
		res.Replies, res.Timeouts, res.Refused, res.Starting)
	if res.Mismatches+res.Unexpected+res.Stale != 0 {
		t.Errorf("restart: %s", res.Report(a.forms))
	}
	a.waitOffloaded(t)
	after := a.stats(t)
	t.Logf("services before the restart %v, after %v", before.rulesByService, after.rulesByService)
	for c := range after.cookies {
		if before.cookies[c] {
			t.Errorf("the service of socket cookie %d outlived the server's restart", c)
		}
	}
}

// finish stops the agent and wants it to have ended cleanly.
func (a *agentRig) finish(t *testing.T) {
	t.Helper()
	a.stop()
	select {
	case err := <-a.agentc:
		if err != nil && err != context.Canceled {
			t.Errorf("agent: %v", err)
		}
		a.agentc <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Error("the agent did not stop within 10 s")
	}
	if strings.Contains(a.santad.Log(), "level=ERROR") {
		t.Errorf("santad logged errors:\n%s", a.santad.Log())
	}
}

// lockedBuffer collects the agent's log for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newTestLogger(w *lockedBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
