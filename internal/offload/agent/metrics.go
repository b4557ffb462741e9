package agent

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/santa-offload/santa/internal/metricserver"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
)

// stats are the agent's counters, guarded by agent.mu.
type stats struct {
	skipped     map[dnsmsg.Reason]uint64
	deleted     map[string]uint64 // by cause
	installed   uint64
	replaced    uint64
	rechecks    uint64
	zoneChanges uint64
	superseded  uint64 // learned, but a zone changed meanwhile
	attached    uint64
	// learnTimeouts counts forms whose learning ran out of time on lost
	// asks (tried again at a later window).
	learnTimeouts uint64
	// pollRetries counts zone polls asked again after a failure.
	pollRetries uint64
}

func newStats() stats {
	return stats{skipped: map[dnsmsg.Reason]uint64{}, deleted: map[string]uint64{}}
}

// snapshot is the stats and gauges at one moment.
type snapshot struct {
	stats
	probes    uint64 // over UDP
	tcpProbes uint64
	asksLost  uint64
	services  []serviceGauge
	forms     int
	zones     int
}

type serviceGauge struct {
	id    uint32
	addr  string
	rules int
}

func (a *agent) snapshot() snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := snapshot{stats: a.stats, probes: a.probe.Sent(), tcpProbes: a.polls.Sent(), asksLost: a.asksLost.Load(), zones: len(a.zones)}
	s.skipped, s.deleted = maps.Clone(a.stats.skipped), maps.Clone(a.stats.deleted)
	for _, g := range a.groups {
		s.forms += len(g.forms)
	}
	for _, id := range slices.Sorted(maps.Keys(a.services)) {
		sv := a.services[id]
		s.services = append(s.services, serviceGauge{id, sv.group.local.String(), len(sv.rules)})
	}
	return s
}

// logSummary logs the counters in one line.
func (a *agent) logSummary() {
	s := a.snapshot()
	var skipped []string
	for _, r := range slices.Sorted(maps.Keys(s.skipped)) {
		skipped = append(skipped, fmt.Sprintf("%s=%d", r, s.skipped[r]))
	}
	var deleted []string
	for _, c := range slices.Sorted(maps.Keys(s.deleted)) {
		deleted = append(deleted, fmt.Sprintf("%s=%d", c, s.deleted[c]))
	}
	a.log.Info("offload", "services", len(s.services), "forms", s.forms, "zones", s.zones, "probes", s.probes,
		"tcp_probes", s.tcpProbes, "asks_lost", s.asksLost, "installed", s.installed, "learn_timeouts", s.learnTimeouts,
		"rechecks", s.rechecks, "replaced", s.replaced, "deleted", strings.Join(deleted, ","),
		"zone_changes", s.zoneChanges, "poll_retries", s.pollRetries, "skipped", strings.Join(skipped, ","))
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

// metrics are the agent's families at this moment.
func (a *agent) metrics() []metricserver.Family {
	s := a.snapshot()
	var skipped, deleted, rules []metricserver.Sample
	for _, r := range slices.Sorted(maps.Keys(s.skipped)) {
		skipped = append(skipped, metricserver.Labeled(s.skipped[r], string(r)))
	}
	for _, c := range slices.Sorted(maps.Keys(s.deleted)) {
		deleted = append(deleted, metricserver.Labeled(s.deleted[c], c))
	}
	for _, sv := range s.services {
		rules = append(rules, metricserver.Labeled(uint64(sv.rules), strconv.Itoa(int(sv.id)), sv.addr))
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	return []metricserver.Family{
		metricserver.NewFamily("santa_offload_skipped_total", counter, "Query forms not offloaded, by reason.", []string{"reason"}, skipped),
		metricserver.NewFamily("santa_offload_deleted_total", counter, "Offloaded forms deleted, by cause: cold (out of the top set), zone (not re-checked after a zone change), zone_unverifiable (the zone's serial could not be asked), sweep (not re-checked by the background sweep).", []string{"cause"}, deleted),
		metricserver.NewFamily("santa_offload_rules", gauge, "Rules installed, by service.", []string{"service", "addr"}, rules),
		metricserver.NewFamily("santa_offload_forms", gauge, "Query forms offloaded.", nil, metricserver.One(uint64(s.forms))),
		metricserver.NewFamily("santa_offload_zones", gauge, "Zones whose serial is polled.", nil, metricserver.One(uint64(s.zones))),
		metricserver.NewFamily("santa_offload_installed_total", counter, "Query forms learned and installed.", nil, metricserver.One(s.installed)),
		metricserver.NewFamily("santa_offload_superseded_total", counter, "Query forms learned but not installed: a zone of theirs changed meanwhile.", nil, metricserver.One(s.superseded)),
		metricserver.NewFamily("santa_offload_probes_total", counter, "Queries sent to the server, by transport.", []string{"transport"},
			[]metricserver.Sample{metricserver.Labeled(s.probes, "udp"), metricserver.Labeled(s.tcpProbes, "tcp")}),
		metricserver.NewFamily("santa_offload_asks_lost_total", counter, "Queries over UDP that got no reply within probe_timeout (asked again within the budget).", nil, metricserver.One(s.asksLost)),
		metricserver.NewFamily("santa_offload_learn_timeouts_total", counter, "Query forms whose learning ran out of time on lost queries (tried again at a later window).", nil, metricserver.One(s.learnTimeouts)),
		metricserver.NewFamily("santa_offload_rechecks_total", counter, "Offloaded forms asked again (zone change or sweep).", nil, metricserver.One(s.rechecks)),
		metricserver.NewFamily("santa_offload_replaced_total", counter, "Rules replaced by a re-check with a new reply.", nil, metricserver.One(s.replaced)),
		metricserver.NewFamily("santa_offload_zone_changes_total", counter, "Zone serial changes seen.", nil, metricserver.One(s.zoneChanges)),
		metricserver.NewFamily("santa_offload_zone_poll_retries_total", counter, "Zone serial polls asked again after a failure, while an answer could still come within the freshness bound.", nil, metricserver.One(s.pollRetries)),
		metricserver.NewFamily("santa_offload_attached_total", counter, "Sockets attached.", nil, metricserver.One(s.attached)),
	}
}
