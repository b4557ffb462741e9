package mcagent

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/santa-offload/santa/internal/metricserver"
)

// stats are the agent's counters, guarded by agent.mu.
type stats struct {
	skipped   map[string]uint64 // by reason
	deleted   map[string]uint64 // by cause
	installed uint64
	refreshed uint64 // rules replaced after their item was read again
	confirmed uint64 // items read again and found as their rule has them
	attached  uint64
	checks    uint64 // generations the watch read
	killed    uint64 // of those, keys written since their rule's: read again
	waits     uint64 // killed keys left to memcached for a while (writeHot)
	fresh     uint64 // keys the watch found written by a set the kernel answers with: kept
}

func newStats() stats { return stats{skipped: map[string]uint64{}, deleted: map[string]uint64{}} }

// snapshot is the stats and gauges at one moment.
type snapshot struct {
	stats
	probes, tcpReads uint64
	keys             int
	services         []serviceGauge
	bumps            bumps // the domain's, as the watch last read them
}

type serviceGauge struct {
	id    uint32
	addr  string
	proto string
	rules int
}

func (a *agent) snapshot() snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := snapshot{stats: a.stats, probes: a.probe.Sent(), tcpReads: a.items.Sent(), keys: len(a.keys), bumps: a.bumps}
	s.skipped, s.deleted = maps.Clone(a.stats.skipped), maps.Clone(a.stats.deleted)
	for _, id := range slices.Sorted(maps.Keys(a.services)) {
		sv := a.services[id]
		proto := "udp"
		if sv.tcp {
			proto = "tcp"
		}
		s.services = append(s.services, serviceGauge{id, sv.local.String(), proto, len(sv.rules)})
	}
	return s
}

// joined is counts as "a=1,b=2", sorted.
func joined(m map[string]uint64) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(out, ",")
}

// logSummary logs the counters in one line.
func (a *agent) logSummary() {
	s := a.snapshot()
	a.log.Info("offload", "services", len(s.services), "keys", s.keys, "probes", s.probes, "tcp_reads", s.tcpReads,
		"installed", s.installed, "refreshed", s.refreshed, "confirmed", s.confirmed, "checks", s.checks, "killed", s.killed, "waits", s.waits, "fresh", s.fresh, "key_bumps", s.bumps.key, "domain_bumps", s.bumps.domain,
		"deleted", joined(s.deleted), "skipped", joined(s.skipped))
}

// serveMetrics serves GET /metrics on addr in Prometheus's text format.
func (a *agent) serveMetrics(addr string) (stop func(), err error) {
	return metricserver.Serve(addr, a.metricsHandler())
}

func (a *agent) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricserver.Handler(a.log, metricserver.Families(a.metrics)))
	return mux
}

// byLabel is m's counts as samples of one label, sorted.
func byLabel(m map[string]uint64) []metricserver.Sample {
	var out []metricserver.Sample
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, metricserver.Labeled(m[k], k))
	}
	return out
}

// metrics are the agent's families at this moment.
func (a *agent) metrics() []metricserver.Family {
	s := a.snapshot()
	var rules []metricserver.Sample
	for _, sv := range s.services {
		rules = append(rules, metricserver.Labeled(uint64(sv.rules), strconv.Itoa(int(sv.id)), sv.addr, sv.proto))
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	return []metricserver.Family{
		metricserver.NewFamily("santa_offload_memcached_skipped_total", counter, "Hot gets not offloaded, by reason: form (not a single-key get in one datagram), "+
			"long_key, in_flight (a write in flight), dead (the domain's life ended), miss, expiring, too_large (more than one datagram), "+
			"changed (a write between the TCP read and the UDP get), malformed, timeout, refused (by santad), slow_install, error.", []string{"reason"}, byLabel(s.skipped)),
		metricserver.NewFamily("santa_offload_memcached_deleted_total", counter, "Offloaded keys deleted, by cause: cold (out of the top set), miss (memcached no "+
			"longer has the item), expiring, too_large, changed, malformed, refused, slow_install.", []string{"cause"}, byLabel(s.deleted)),
		metricserver.NewFamily("santa_offload_memcached_rules", gauge, "Rules installed, by service.", []string{"service", "addr", "proto"}, rules),
		metricserver.NewFamily("santa_offload_memcached_keys", gauge, "Keys offloaded.", nil, metricserver.One(uint64(s.keys))),
		metricserver.NewFamily("santa_offload_memcached_installed_total", counter, "Keys learned and installed.", nil, metricserver.One(s.installed)),
		metricserver.NewFamily("santa_offload_memcached_refreshed_total", counter, "Rules replaced after their item was read again (guard died, deadline, max_age).", nil, metricserver.One(s.refreshed)),
		metricserver.NewFamily("santa_offload_memcached_confirmed_total", counter, "Items read again (max_age) and found as their rule has them: the rule is kept.", nil, metricserver.One(s.confirmed)),
		metricserver.NewFamily("santa_offload_memcached_watch_checks_total", counter, "Generations of offloaded keys read by the watch.", nil, metricserver.One(s.checks)),
		metricserver.NewFamily("santa_offload_memcached_watch_killed_total", counter, "Offloaded keys the watch found written since their rule was made, and read again.", nil, metricserver.One(s.killed)),
		metricserver.NewFamily("santa_offload_memcached_watch_fresh_total", counter, "Offloaded keys the watch found written by a set whose value the kernel answers with: kept as they are.", nil, metricserver.One(s.fresh)),
		metricserver.NewFamily("santa_offload_memcached_write_waits_total", counter, "Keys whose rule a write killed after fewer gets than reading them again costs: left to memcached for a while (doubling, 1 s to 64 s).", nil, metricserver.One(s.waits)),
		metricserver.NewFamily("santa_offload_memcached_attached_total", counter, "Sockets attached.", nil, metricserver.One(s.attached)),
		metricserver.NewFamily("santa_offload_memcached_probes_total", counter, "Requests sent to memcached: UDP gets, TCP mg reads.", []string{"transport"},
			[]metricserver.Sample{metricserver.Labeled(s.probes, "udp"), metricserver.Labeled(s.tcpReads, "tcp")}),
	}
}
