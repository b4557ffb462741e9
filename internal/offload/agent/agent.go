// Package agent is the DNS offload agent (santa-offload dns): it attaches
// every socket a DNS server answers on to santad, learns from the kernel's
// count of passed queries which are hot, asks the server for their
// answers and installs them as rules, and keeps them equal to the server's
// answers as the zones change (docs/offload-dns.md).
package agent

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/probe"
	"github.com/santa-offload/santa/internal/offload/santadconn"
	"github.com/santa-offload/santa/internal/offload/server"
	"github.com/santa-offload/santa/internal/rate"
)

// Run runs the agent until ctx ends, then detaches its services: without
// the agent nobody keeps the rules fresh, so the offload ends with it.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := cfg.checkLocalBinds(server.UnprivilegedPortStart); err != nil {
		return err
	}
	finder, err := server.NewFinder(server.Target{PID: cfg.PID, Unit: cfg.Unit, Cgroup: cfg.Cgroup, Port: cfg.Port, Netns: cfg.Netns})
	if err != nil {
		return err
	}
	prober, err := probe.Open(cfg.Netns, cfg.ProbeConcurrency)
	if err != nil {
		return err
	}
	defer prober.Close()
	polls := probe.OpenStreams(cfg.Netns)
	defer polls.Close()
	a := newAgent(cfg, finder, finder.Take, prober, polls)
	a.log.Info("offloading", "server", finder.Describe(), "probe_port", prober.Port(), "max_rules", cfg.MaxRules)
	if cfg.Metrics != "" {
		stop, err := a.serveMetrics(cfg.Metrics)
		if err != nil {
			return err
		}
		defer stop()
	}
	a.run(ctx)
	return nil
}

// streamAsker asks the server (over TCP: *probe.Streams).
type streamAsker interface {
	Ask(ctx context.Context, dst netip.AddrPort, query []byte, timeout time.Duration) ([]byte, error)
	Sent() uint64
}

type agent struct {
	cfg    Config
	log    *slog.Logger
	finder server.Scanner
	take   func(server.Socket) (int, error)
	probe  probe.Asker
	// polls are the zone pollers' TCP connections, which nothing else
	// uses: a poll must not wait behind other asks (measured: with 64 of
	// learning's in flight on one connection to an overloaded BIND, polls
	// timed out and every form of the zone was deleted).
	polls  streamAsker
	dialer *santadconn.Dialer[Santad]
	now    func() time.Time
	// seq orders asks against zone changes: an answer asked before a
	// change of one of its zones was seen is never installed.
	seq atomic.Uint64
	// asksLost counts UDP asks that got no reply in time.
	asksLost atomic.Uint64
	// zonesCtx is the life of the zones' pollers.
	zonesCtx context.Context
	pollers  sync.WaitGroup
	// sighted is when learning first saw the zones' serials.
	sighted sightings

	mu       sync.Mutex
	sd       Santad              // nil while not connected
	scans    santadconn.ScanLog  // logs the scans' failures once a run
	takes    santadconn.TakeLog  // logs each socket's failures to be taken up once a run
	conns    uint64              // connections to santad dropped so far: names the current one
	sockets  map[uint64]*service // by socket inode
	services map[uint32]*service // by santad's id
	groups   map[netip.AddrPort]*group
	zones    map[zoneKey]*zone
	skipped  map[skipKey]time.Time // until then, not tried again
	retries  map[skipKey]*retry    // forms whose learning ran out of time
	refused  map[uint64]time.Time  // sockets whose learning santad refused, by inode: until then, not taken
	windows  uint64                // windows started
	stats    stats
	// pollGrace is how long after an answered poll was asked the next
	// answer may come without stretching the freshness bound (pollSerial).
	pollGrace time.Duration
	// line is the offloaded forms in the order of their last checks,
	// oldest first: the sweep's order, kept as forms are checked rather
	// than sorted each second (100,000 forms sorted a second were 2 % of
	// the server's core, docs/benchmarks.md (h)). A form joins when
	// installed, its learning asked at most a window before.
	line list.List
	// rankForms is rankForms but in tests.
	rankForms int

	// follower times the windows: the window loop's own.
	follower *santadconn.Follower
}

// retry is a form whose learning ran out of time on lost asks (an
// overloaded server drops queries): tried again at window next, after
// lost such windows in a row.
type retry struct {
	lost int
	next uint64
}

// group is the sockets bound to one address and port: one SO_REUSEPORT
// group, among which the kernel spreads the queries. Each socket is a
// service of santad's, and every one gets the same rules.
type group struct {
	local    netip.AddrPort
	dst      netip.AddrPort // where the agent asks the server
	services map[uint32]*service
	forms    map[string]*form   // offloaded, by key
	learning map[string]float64 // being learned: the rate that chose it
	ranked   time.Time          // the last ranking, which read the rules' hits
	rankedAt uint64             // the window of the last ranking
	full     bool               // whether it filled the top set (MaxRules forms)
	edge     float64            // the least score in the top set it chose, if full
	rate     float64            // and the set's queries a second
	windows  uint64             // windows chosen
	// hitsSince is when the rules' hits were last counted from anew
	// (resync after a new connection to santad), and recount whether the
	// next resync does that: a ranking's span starts there at the earliest.
	hitsSince time.Time
	recount   bool
	// evidence is the passed queries of the forms not offloaded over the
	// last windows, from which newcomers are ranked (choose).
	evidence *rate.Evidence
	calm     int    // windows in a row its top set was settled, up to settleWindows
	counts   uint32 // the learning's counts it asked santad for (settle)
	// sockets is the inodes of its services when the connection to santad
	// last broke, not taken up again since (scan): while it has no
	// services, its forms are the process's that held those sockets; while
	// any is bound and not taken up, santad's rules there may answer the
	// agent's asks (keepServersConfirmations).
	sockets []uint64
}

// service is an attached socket.
type service struct {
	id     uint32
	inode  uint64
	group  *group
	rules  map[*form]uint32 // the form's rule id on this service
	byRule map[uint32]*form
	hits   map[uint32]uint64 // the rule's hits when last read
}

// form is an offloaded query form: a query's bytes after the transaction
// id, and the server's reply.
type form struct {
	key       string // query[2:]
	query     []byte // transaction id 0
	reply     []byte // transaction id 0
	group     *group
	zones     []*zone
	seq       uint64    // of the ask the reply came from
	rate      float64   // requests per second, last window
	installed time.Time // when first installed
	checked   time.Time // when last asked
	hits      uint64    // its rules' hits read since the last ranking
	inLine    *list.Element
}

type skipKey struct {
	group netip.AddrPort
	key   string
}

func newAgent(cfg Config, f server.Scanner, take func(server.Socket) (int, error), p probe.Asker, polls streamAsker) *agent {
	a := &agent{cfg: cfg, log: cfg.Log, finder: f, take: take, probe: p, polls: polls, now: time.Now,
		sockets: map[uint64]*service{}, services: map[uint32]*service{}, groups: map[netip.AddrPort]*group{},
		zones: map[zoneKey]*zone{}, skipped: map[skipKey]time.Time{}, retries: map[skipKey]*retry{}, refused: map[uint64]time.Time{},
		stats: newStats(), rankForms: rankForms, follower: santadconn.NewFollower(time.Duration(cfg.Window)),
		pollGrace: cfg.pollGrace()}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	d := cfg.Dial
	if d == nil {
		d = func() (Santad, error) { return dial(cfg.Socket) }
	}
	a.dialer = santadconn.NewDialer(d)
	a.zonesCtx = context.Background()
	return a
}

// run runs the loops until ctx ends, then detaches.
func (a *agent) run(ctx context.Context) {
	zctx, stopZones := context.WithCancel(ctx)
	a.zonesCtx = zctx
	var loops santadconn.Loops
	loops.Every(ctx, time.Duration(a.cfg.Scan), a.scan)
	loops.Every(ctx, a.follower.Poll(), a.follow)
	loops.Every(ctx, time.Second, a.sweep)
	if a.cfg.LogEvery > 0 {
		loops.Every(ctx, time.Duration(a.cfg.LogEvery), func(context.Context) { a.logSummary() })
	}
	<-ctx.Done()
	loops.Wait()
	stopZones()
	a.pollers.Wait()
	a.detachAll()
}

// santad is the connection to santad, dialling it if there is none. Called
// with a.mu held.
func (a *agent) santad() (Santad, error) { return a.dialer.Get(&a.sd, a.log) }

// failed handles an error of a santad call: a refusal (*client.Error) is
// the request's; anything else is the connection's, which is closed. The
// next scan dials again and takes the services up where they are: santad
// keeps them across its restarts, and the agent knows them by socket
// cookie. Called with a.mu held.
func (a *agent) failed(what string, err error) {
	if !santadconn.Drop(&a.sd, a.log, what, err) {
		return
	}
	a.conns++
	// The sockets are taken again, and their services found by cookie.
	for _, s := range a.services {
		g := s.group
		g.services, g.recount = map[uint32]*service{}, true
		g.sockets = append(g.sockets, s.inode)
	}
	a.sockets = map[uint64]*service{}
	a.services = map[uint32]*service{}
}

// detachAll detaches every service: the agent is leaving.
func (a *agent) detachAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	santadconn.DetachAll(&a.sd, slices.Collect(maps.Keys(a.services)), a.log)
}

// askStable asks query (transaction id 0) over UDP n times and returns
// the reply (transaction id 0) if every reply is safe and all are the
// same. A lost ask is asked again (askUDP).
func (a *agent) askStable(ctx context.Context, dst netip.AddrPort, query []byte, n int) ([]byte, *dnsmsg.Message, error) {
	r, err := a.askUDP(ctx, dst, query)
	if err != nil {
		return nil, nil, err
	}
	r, m, err := checkReply(query, r)
	if err != nil {
		return nil, nil, err
	}
	if err := a.askAgain(ctx, dst, query, r, n); err != nil {
		return nil, nil, err
	}
	return r, m, nil
}

// askAgain asks query again until it has been asked n times, first
// being the first reply: each reply must be safe and the same as first.
func (a *agent) askAgain(ctx context.Context, dst netip.AddrPort, query, first []byte, n int) error {
	for i := 2; i <= n; i++ {
		r, err := a.askUDP(ctx, dst, query)
		if err != nil {
			return err
		}
		r, _, err = checkReply(query, r)
		if err != nil {
			return err
		}
		if string(r) != string(first) {
			return &dnsmsg.Skip{Reason: dnsmsg.Unstable, Detail: fmt.Sprintf("ask %d got another reply than ask 1", i)}
		}
	}
	return nil
}

// askUDP asks query over UDP, and again each time no reply came within
// ProbeTimeout, until ctx ends: an overloaded server's socket drops
// queries, the agent's among the others. An ask lost when ctx ends is a
// Timeout skip; ctx's error means none was lost.
func (a *agent) askUDP(ctx context.Context, dst netip.AddrPort, query []byte) ([]byte, error) {
	lost := 0
	for {
		r, err := a.probe.Ask(ctx, dst, query, time.Duration(a.cfg.ProbeTimeout))
		if err == nil {
			return r, nil
		}
		timeout := errors.Is(err, probe.ErrTimeout)
		if timeout {
			lost++
			a.asksLost.Add(1)
		}
		switch {
		case lost > 0 && ctx.Err() != nil:
			return nil, &dnsmsg.Skip{Reason: dnsmsg.Timeout, Detail: fmt.Sprintf("%d asks lost", lost)}
		case !timeout:
			return nil, err
		}
	}
}

// askStream asks query (transaction id 0) once over the pollers' TCP
// connection, waiting at most timeout, and returns the reply (transaction id 0) if it is safe. A
// server that takes no TCP connection is asked over UDP instead
// (askUDP). Zone serials are asked this way: TCP does not queue behind
// the overflowing UDP socket of an overloaded server.
func (a *agent) askStream(ctx context.Context, dst netip.AddrPort, query []byte, timeout time.Duration) ([]byte, *dnsmsg.Message, error) {
	r, err := a.polls.Ask(ctx, dst, query, timeout)
	switch {
	case errors.Is(err, probe.ErrNoStream):
		return a.askStable(ctx, dst, query, 1)
	case errors.Is(err, probe.ErrTimeout):
		return nil, nil, &dnsmsg.Skip{Reason: dnsmsg.Timeout, Detail: err.Error()}
	case err != nil:
		return nil, nil, err
	}
	return checkReply(query, r)
}

// checkReply checks reply, the server's answer to query (transaction id
// 0) asked with the reply's id, and returns it with id 0.
func checkReply(query, reply []byte) ([]byte, *dnsmsg.Message, error) {
	sent := append(reply[:2:2], query[2:]...)
	m, err := dnsmsg.CheckReply(sent, reply)
	if err != nil {
		return nil, nil, err
	}
	reply[0], reply[1] = 0, 0
	return reply, m, nil
}
