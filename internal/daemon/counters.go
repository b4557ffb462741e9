package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/santa-offload/santa/internal/protocol"
)

// counters count what santad does and keeps nowhere else: requests,
// refusals, its own errors. Every label takes values from a fixed set (a
// message type santad knows, an errno, a reason named here), whatever a
// client sends.
type counters struct {
	requests    *prometheus.CounterVec // by type
	refused     *prometheus.CounterVec // by type and errno
	connRefused *prometheus.CounterVec // by reason
	errors      *prometheus.CounterVec // by reason
}

// Reasons of santa_errors_total: santad's own failures, each also logged.
const (
	errAccept         = "accept"           // accepting a connection
	errPeer           = "peer_credentials" // reading a client's SO_PEERCRED
	errEncode         = "reply_encode"     // encoding a reply (EIO sent instead)
	errJournalAppend  = "journal_append"   // a journal append (a snapshot written instead)
	errJournalCompact = "journal_compact"  // a journal snapshot
	errAdopt          = "adopt"            // adopting a TCP listener's connections
	errRestore        = "restore"          // restoring a journaled service or its rules
)

// connQuotaReason is santa_connections_refused_total's reason for a uid
// at its quota_connections.
const connQuotaReason = "quota"

func newCounters() *counters {
	c := &counters{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "santa_requests_total",
			Help: "Requests from clients, by message type (invalid: not a request type santad knows)."}, []string{"type"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "santa_requests_refused_total",
			Help: "Requests answered with ERROR, by message type and reason, the errno of the reply (EDQUOT: a quota; EPERM: another uid's service; " +
				"EINVAL, EPROTO, EMSGSIZE: bad input; ESTALE: a guard's generation moved; EIO: santad could not save the change; docs/protocol.md has them all)."},
			[]string{"type", "reason"}),
		connRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "santa_connections_refused_total",
			Help: "Connections refused, by reason: quota, the uid holds quota_connections already."}, []string{"reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "santa_errors_total",
			Help: "santad's own failures, each logged, by reason: accept, peer_credentials, reply_encode, journal_append, journal_compact, adopt, restore."},
			[]string{"reason"}),
	}
	// Every reason santad can give is there from the start, at 0: a
	// rate() over a series that appears only with its first event misses
	// that event.
	for _, r := range []string{errAccept, errPeer, errEncode, errJournalAppend, errJournalCompact, errAdopt, errRestore} {
		c.errors.WithLabelValues(r)
	}
	c.connRefused.WithLabelValues(connQuotaReason)
	return c
}

func (c *counters) Describe(ch chan<- *prometheus.Desc) {
	c.requests.Describe(ch)
	c.refused.Describe(ch)
	c.connRefused.Describe(ch)
	c.errors.Describe(ch)
}

func (c *counters) Collect(ch chan<- prometheus.Metric) {
	c.requests.Collect(ch)
	c.refused.Collect(ch)
	c.connRefused.Collect(ch)
	c.errors.Collect(ch)
}

// request counts a request with header h and its reply.
func (c *counters) request(h protocol.Header, reply protocol.Body) {
	typ := "invalid"
	if h.Type.Known() && !h.Type.IsReply() {
		typ = h.Type.Name()
	}
	c.requests.WithLabelValues(typ).Inc()
	if e, ok := reply.(*protocol.Error); ok {
		c.refused.WithLabelValues(typ, protocol.ErrnoName(e.Code)).Inc()
	}
}

// failed counts one of santad's own failures.
func (c *counters) failed(reason string) { c.errors.WithLabelValues(reason).Inc() }
