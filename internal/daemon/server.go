package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// Dataplane is what serving clients needs of the data plane: a
// *datapath.Datapath, or a fake in tests where the kernel is not the point.
type Dataplane interface {
	AddService(fd int, info model.SocketInfo, owner *model.ConnOwner) (model.ServiceID, error)
	// SetConnectionLimit sets the connection places uid's TCP listeners
	// may take from now on (0: no limit but the host's).
	SetConnectionLimit(uid, limit uint32)
	Adopter
	RemoveService(model.ServiceID) error
	Apply(model.ServiceID, model.Batch) ([]model.RuleID, error)
	ReserveRuleIDs(n int) ([]model.RuleID, error)
	ReleaseRuleIDs([]model.RuleID)
	ServiceStats(model.ServiceID) (model.ServiceStats, error)
	// EachRuleStats calls out with the counters of each of ids (rising)
	// still installed.
	EachRuleStats(ids []model.RuleID, out func(model.RuleID, model.RuleStats)) error
	PathStats() (model.PathStats, error)
	SetLearning(model.ServiceID, model.Learning) error
	Hot(id model.ServiceID, from, n int) (model.HotSet, error)
	SetParser(model.ServiceID, model.Parser) error
	Generation(id model.ServiceID, key []byte) (model.Generation, error)
	MemcachedStats(model.ServiceID) (model.MemcachedStats, error)
}

// Server answers santad's clients and keeps the state, the journal and
// the data plane in step.
type Server struct {
	dp         Dataplane
	log        *slog.Logger
	adminGroup atomic.Int64 // gid whose members are admins, or noAdminGroup
	quotas     quotaPolicy  // under mu: a reload replaces it
	capacity   uint32       // rules per host
	netns      uint64       // SO_NETNS_COOKIE of santad's network namespace
	version    string       // the daemon's version text
	running    Config       // the configuration as started or last reloaded (reloadMu)
	reloadMu   sync.Mutex

	// counters are the requests, refusals and errors, for the metrics;
	// serving is set while santad accepts clients (healthz).
	counters *counters
	serving  atomic.Bool

	// mu orders every change: data plane first, then state, then
	// journal, all before the reply. Reads take it too.
	mu      sync.Mutex
	st      state
	held    map[uint32]usage // by owner uid: the rules open transactions stage, to add or to replace others with
	journal *journal.Journal
	ifaces  []protocol.Interface

	connMu sync.Mutex
	conns  map[*net.UnixConn]bool // open connections, closed on shutdown
	byUID  map[uint32]uint32      // open connections of non-admin uids
	// refusing holds the uids one of whose connections over the quota is
	// being told so (admitConnection).
	refusing map[uint32]bool
	// connQuota bounds byUID's counts (0: unlimited).
	connQuota uint32
	wg        sync.WaitGroup // one per connection goroutine
}

// minCompact is the journal size below which it is never compacted: a
// small journal costs less than rewriting it often.
const minCompact = 1 << 20

// NewServer serves dp with the state already in j. netns is the network
// namespace cookie of the sockets santad can serve.
func NewServer(dp Dataplane, j *journal.Journal, cfg Config, netns uint64, log *slog.Logger) (*Server, error) {
	q, admins, err := cfg.access()
	if err != nil {
		return nil, err
	}
	s := &Server{dp: dp, log: log, quotas: q, capacity: cfg.MaxRules, netns: netns, version: Version(),
		counters: newCounters(), st: newState(), held: map[uint32]usage{}, journal: j, conns: map[*net.UnixConn]bool{},
		byUID: map[uint32]uint32{}, refusing: map[uint32]bool{}, connQuota: cfg.QuotaConnections, running: cfg}
	s.adminGroup.Store(admins)
	return s, nil
}

// record writes a change, already made to the state, to the journal. If
// appending fails, a snapshot of the state holds the change just as well.
// It also compacts a journal grown past twice the state's size. Called
// with s.mu held.
func (s *Server) record(write func(*journal.Journal) error) error {
	if err := write(s.journal); err != nil {
		s.log.Error("journal append failed; writing a snapshot instead", "err", err)
		s.counters.failed(errJournalAppend)
		return s.compact()
	}
	if size := s.journal.Size(); size > minCompact && size > 2*s.st.live {
		if err := s.compact(); err != nil {
			s.log.Error("compacting the journal", "err", err)
		}
	}
	return nil
}

// compact rewrites the journal as a snapshot of the state. Called with
// s.mu held.
func (s *Server) compact() error {
	before := s.journal.Size()
	if err := s.journal.Compact(s.st.journaled); err != nil {
		s.counters.failed(errJournalCompact)
		return err
	}
	s.log.Info("journal compacted", "bytes_before", before, "bytes", s.journal.Size())
	return nil
}

// setInterfaces tells STATUS where the data plane runs.
func (s *Server) setInterfaces(ifaces []protocol.Interface) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ifaces = ifaces
}

// restored adds a service restored from the journal to the state.
func (s *Server) restored(js *journal.Service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.add(js)
}

// dropped forgets a service the data plane no longer has (EndRestore).
func (s *Server) dropped(id model.ServiceID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sv := s.st.services[id]; sv != nil {
		s.forget(sv, "socket closed during restore")
	}
}

// SocketClosed is the data plane's news that a service's socket closed
// and its rules are gone. The id may already name a newer service (ids
// are reused, late but at once when the pool is full), so the socket's
// cookie decides.
func (s *Server) SocketClosed(id model.ServiceID, info model.SocketInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sv := s.st.services[id]; sv != nil && sv.Info.Cookie == info.Cookie {
		s.forget(sv, "socket closed")
	}
}

// forget drops a service from the state and the journal. Called with s.mu
// held.
func (s *Server) forget(sv *service, why string) {
	s.st.remove(sv)
	if err := s.record(func(j *journal.Journal) error { return j.Remove(sv.ID) }); err != nil {
		s.log.Error("journaling the end of a service", "service", sv.ID, "err", err)
	}
	s.log.Info("service ended", "service", sv.ID, "port", sv.Info.Local.Port(), "owner_uid", sv.UID,
		"rules", len(sv.Rules), "why", why)
}

// Snapshot compacts the journal now: after a restore, so that the next
// start replays only what is live.
func (s *Server) Snapshot() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.compact(); err != nil {
		return fmt.Errorf("writing journal snapshot: %w", err)
	}
	return nil
}
