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
	s := snapshot{stats: a.stats, probes: a.probe.Sent(), tcpProbes: a.stream.Sent(), asksLost: a.asksLost.Load(), zones: len(a.zones)}
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
		"zone_changes", s.zoneChanges, "skipped", strings.Join(skipped, ","))
}

// serveMetrics serves GET /metrics on addr in Prometheus's text format.
func (a *agent) serveMetrics(addr string) (stop func(), err error) {
	return metricserver.Serve(addr, a.metricsHandler())
}

func (a *agent) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricserver.Handler(a.log, collector{a}))
	return mux
}

// metric is one family and its samples.
type metric struct {
	name string
	typ  prometheus.ValueType
	help string
	// labels name what samples' values are.
	labels  []string
	samples []sample
}

type sample struct {
	labels []string // values, in the order of metric.labels
	value  uint64
}

func one(v uint64) []sample { return []sample{{value: v}} }

// collector reads the agent's counters at each scrape. It describes no
// metric in advance (an unchecked collector): its families are those
// metrics lists, each with one set of labels.
type collector struct{ a *agent }

func (collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.a.metrics() {
		desc := prometheus.NewDesc(m.name, m.help, m.labels, nil)
		for _, smp := range m.samples {
			ch <- prometheus.MustNewConstMetric(desc, m.typ, float64(smp.value), smp.labels...)
		}
	}
}

// metrics are the agent's families at this moment.
func (a *agent) metrics() []metric {
	s := a.snapshot()
	var skipped, deleted, rules []sample
	for _, r := range slices.Sorted(maps.Keys(s.skipped)) {
		skipped = append(skipped, sample{[]string{string(r)}, s.skipped[r]})
	}
	for _, c := range slices.Sorted(maps.Keys(s.deleted)) {
		deleted = append(deleted, sample{[]string{c}, s.deleted[c]})
	}
	for _, sv := range s.services {
		rules = append(rules, sample{[]string{strconv.Itoa(int(sv.id)), sv.addr}, uint64(sv.rules)})
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	return []metric{
		{"santa_offload_skipped_total", counter, "Query forms not offloaded, by reason.", []string{"reason"}, skipped},
		{"santa_offload_deleted_total", counter, "Offloaded forms deleted, by cause: cold (out of the top set), zone (not re-checked after a zone change), zone_unverifiable (the zone's serial could not be asked), sweep (not re-checked by the background sweep).", []string{"cause"}, deleted},
		{"santa_offload_rules", gauge, "Rules installed, by service.", []string{"service", "addr"}, rules},
		{"santa_offload_forms", gauge, "Query forms offloaded.", nil, one(uint64(s.forms))},
		{"santa_offload_zones", gauge, "Zones whose serial is polled.", nil, one(uint64(s.zones))},
		{"santa_offload_installed_total", counter, "Query forms learned and installed.", nil, one(s.installed)},
		{"santa_offload_superseded_total", counter, "Query forms learned but not installed: a zone of theirs changed meanwhile.", nil, one(s.superseded)},
		{"santa_offload_probes_total", counter, "Queries sent to the server, by transport.", []string{"transport"},
			[]sample{{[]string{"udp"}, s.probes}, {[]string{"tcp"}, s.tcpProbes}}},
		{"santa_offload_asks_lost_total", counter, "Queries over UDP that got no reply within probe_timeout (asked again within the budget).", nil, one(s.asksLost)},
		{"santa_offload_learn_timeouts_total", counter, "Query forms whose learning ran out of time on lost queries (tried again at a later window).", nil, one(s.learnTimeouts)},
		{"santa_offload_rechecks_total", counter, "Offloaded forms asked again (zone change or sweep).", nil, one(s.rechecks)},
		{"santa_offload_replaced_total", counter, "Rules replaced by a re-check with a new reply.", nil, one(s.replaced)},
		{"santa_offload_zone_changes_total", counter, "Zone serial changes seen.", nil, one(s.zoneChanges)},
		{"santa_offload_attached_total", counter, "Sockets attached.", nil, one(s.attached)},
	}
}
