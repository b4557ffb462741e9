// Package mcagent is the memcached offload agent (santa-offload
// memcached): it attaches an unmodified memcached's TCP listeners and UDP
// sockets to santad as one generation domain, learns from the kernel's
// counts of passed UDP gets which keys are hot, reads each one's item
// from memcached and installs its UDP reply as a rule guarded by the
// key's generation and the item's deadline, so that a write stops the
// rule before memcached acknowledges it (docs/offload-memcached.md,
// docs/memcached.md).
package mcagent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/probe"
	"github.com/santa-offload/santa/internal/offload/santadconn"
	"github.com/santa-offload/santa/internal/offload/server"
	"github.com/santa-offload/santa/internal/rate"
)

// Run runs the agent until ctx ends, then detaches its services: without
// the agent the rules would not follow memcached's hot set (they would
// stay correct: the data plane invalidates them on writes by itself). It
// returns an error if memcached cannot be offloaded (ErrNoUDP).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	finder, err := server.NewFinder(server.Target{PID: cfg.PID, Unit: cfg.Unit, Cgroup: cfg.Cgroup,
		Port: cfg.udpPort(), TCPPort: cfg.Port, Netns: cfg.Netns})
	if err != nil {
		return err
	}
	prober, err := probe.Open(cfg.Netns, cfg.ProbeConcurrency)
	if err != nil {
		return err
	}
	defer prober.Close()
	reader := newItems(cfg.Netns)
	defer reader.Close()
	a := newAgent(cfg, finder, finder.Take, prober, reader)
	a.log.Info("offloading memcached", "server", finder.Describe(), "probe_port", prober.Port(), "max_rules", cfg.MaxRules)
	if cfg.Metrics != "" {
		stop, err := a.serveMetrics(cfg.Metrics)
		if err != nil {
			return err
		}
		defer stop()
	}
	return a.run(ctx)
}

// ErrNoUDP is the refusal of a memcached that serves no UDP: only UDP gets
// are offloaded.
var ErrNoUDP = errors.New("memcached listens on TCP but has no UDP socket: nothing to offload " +
	"(only UDP gets are answered by the kernel; start memcached with -U PORT, and give that port as udp_port if it is not port)")

// noUDPGrace is how long memcached may listen on TCP without a UDP socket
// before the agent gives up: memcached binds TCP first, then UDP.
const noUDPGrace = 2 * time.Second

type agent struct {
	cfg    Config
	log    *slog.Logger
	finder server.Scanner
	take   func(server.Socket) (int, error)
	probe  probe.Asker
	items  itemReader
	dialer *santadconn.Dialer[Santad]
	now    func() time.Time

	mu       sync.Mutex
	added    uint64              // keys ever offloaded: the next one's seq
	sd       Santad              // nil while not connected
	scans    santadconn.ScanLog  // logs the scans' failures once a run
	takes    santadconn.TakeLog  // logs each socket's failures to be taken up once a run
	sockets  map[uint64]*service // by socket inode
	services map[uint32]*service // by santad's id
	// leader is the TCP listener that started the domain; every other
	// service joined it. nil: no domain yet, and no UDP service.
	leader  *service
	keys    map[string]*key      // offloaded, by hot form
	skipped map[string]time.Time // hot forms not tried again until then
	// evidence is the passed gets of the forms not offloaded over the
	// last windows, which newcomers are ranked by.
	evidence *rate.Evidence
	// lastRead is when the rules' hits were last read; windows counts
	// the windows, rankKeys is rankKeys but in tests.
	lastRead time.Time
	windows  uint64
	rankKeys int
	// follower times the windows: the window loop's own.
	follower *santadconn.Follower
	// evictions is memcached's eviction count when last read (if
	// evictionsRead), evictedAt when it was last seen to move.
	evictions     uint64
	evictionsRead bool
	evictedAt     time.Time
	// tcpOnly is since when memcached has been seen listening on TCP with
	// no UDP socket (zero: it has one, or no TCP listener either).
	tcpOnly time.Time
	// everUDP: the agent has had a UDP service (memcached without one
	// is then restarting, and waited for).
	everUDP bool
	// warnedNoTCP: memcached has UDP but no TCP listener, logged once.
	warnedNoTCP bool
	// tainted are listeners (by inode) whose domain ended while they
	// lived (stranded); warnedTainted: that was logged.
	tainted       map[uint64]bool
	warnedTainted bool
	// warnedHeld: every key of the last window had a write in flight
	// (logged once).
	warnedHeld bool
	// bumps is the domain's slot and domain bumps when the watch last
	// looked, and bumpedAt when it saw them move: a key checked since
	// cannot have been killed by a write.
	bumps    bumps
	bumpedAt time.Time
	// watched is the offloaded keys the watch looks at, hottest first as
	// of the last window (then those learned since), and tail where it
	// goes on in the colder ones.
	watched []*key
	tail    int
	fatal   error
	stats   stats
}

// service is an attached socket: a TCP listener or a UDP socket.
type service struct {
	id     uint32
	inode  uint64
	tcp    bool
	local  netip.AddrPort
	rules  map[*key]uint32 // UDP: the key's rule on this service
	byRule map[uint32]*key
	hits   map[uint32]uint64 // the rule's hits when last read
}

// key is an offloaded key: its hot form (the request's bytes from
// keyOffset on), memcached's UDP reply to it (request id 0), and what
// bounds the rule's life.
type key struct {
	form     string
	mkey     []byte
	seq      uint64 // the agent's count of keys when it was added: ties in rate go by it
	reply    []byte
	rate     float64           // requests per second, last window
	learned  time.Time         // when its item was read
	deadline time.Time         // the item's earliest expiry; zero: none
	gen      client.Generation // read before the item: the rule's guard
	// checked is when its generation was last read (the watch); checks
	// and kills count the watch's reads of it and those that found it
	// written, halved now and then so that they follow its writes.
	checked       time.Time
	checks, kills uint32
	// killedAt is when its rule was first found killed since it was
	// read (zero: not since); wait is how long it then waits before it is
	// read again (writeHot).
	killedAt time.Time
	wait     time.Duration
	// rebuilds: memcached's UDP reply was udpReply of the item read over
	// TCP, so that reading it again takes the TCP read alone.
	rebuilds bool
}

func newAgent(cfg Config, f server.Scanner, take func(server.Socket) (int, error), p probe.Asker, items itemReader) *agent {
	a := &agent{cfg: cfg, log: cfg.Log, finder: f, take: take, probe: p, items: items, now: time.Now,
		sockets: map[uint64]*service{}, services: map[uint32]*service{}, keys: map[string]*key{},
		skipped: map[string]time.Time{}, tainted: map[uint64]bool{}, stats: newStats(), rankKeys: rankKeys,
		follower: santadconn.NewFollower(time.Duration(cfg.Window)),
		evidence: rate.NewEvidence(evidenceSpan)}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	d := cfg.Dial
	if d == nil {
		d = func() (Santad, error) { return dial(cfg.Socket) }
	}
	a.dialer = santadconn.NewDialer(d)
	return a
}

// run runs the loops until ctx ends or memcached cannot be offloaded,
// then detaches.
func (a *agent) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	var loops santadconn.Loops
	loops.Every(ctx, time.Duration(a.cfg.Scan), func(context.Context) {
		if err := a.scan(); err != nil {
			cancel(err)
		}
	})
	loops.Every(ctx, a.follower.Poll(), a.follow)
	if a.cfg.Watch > 0 {
		loops.Every(ctx, time.Duration(a.cfg.Watch), a.watch)
	}
	if a.cfg.LogEvery > 0 {
		loops.Every(ctx, time.Duration(a.cfg.LogEvery), func(context.Context) { a.logSummary() })
	}
	<-ctx.Done()
	loops.Wait()
	a.detachAll()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// santad is the connection to santad, dialling it if there is none. Called
// with a.mu held.
func (a *agent) santad() (Santad, error) { return a.dialer.Get(&a.sd, a.log) }

// failed handles an error of a santad call: a refusal (*client.Error) is
// the request's; anything else is the connection's, which is closed. The
// next scan dials again and takes the services up by socket cookie (santad
// keeps them across its restarts, unmarked and without their guarded
// rules), marks them again and learns every key afresh. Called with a.mu
// held.
func (a *agent) failed(what string, err error) {
	if santadconn.Drop(&a.sd, a.log, what, err) {
		a.endDomain()
	}
}

// endDomain forgets every service and key: the next scan takes the
// sockets again, and starts a new domain. Called with a.mu held.
func (a *agent) endDomain() {
	a.sockets, a.services, a.leader = map[uint64]*service{}, map[uint32]*service{}, nil
	a.keys = map[string]*key{}
	a.lastRead, a.bumps, a.bumpedAt = time.Time{}, bumps{}, time.Time{}
	a.evictionsRead = false
	a.watched, a.tail = nil, 0
}

// detachAll detaches every service, UDP first (a UDP service must not
// outlive its domain's leader): the agent is leaving.
func (a *agent) detachAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []uint32
	for _, s := range a.udpServices() {
		ids = append(ids, s.id)
	}
	for _, s := range a.services {
		if s.tcp {
			ids = append(ids, s.id)
		}
	}
	santadconn.DetachAll(&a.sd, ids, a.log)
}

// udpServices are the UDP services, which hold the rules. Called with
// a.mu held.
func (a *agent) udpServices() []*service {
	var out []*service
	for _, s := range a.services {
		if !s.tcp {
			out = append(out, s)
		}
	}
	return out
}

// serviceIDs is the services' ids, in their order.
func serviceIDs(svcs []*service) iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for _, sv := range svcs {
			if !yield(sv.id) {
				return
			}
		}
	}
}

func (k *key) String() string { return fmt.Sprintf("%q", k.mkey) }
