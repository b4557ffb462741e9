package daemon

import (
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// stateCollector reads santad's state and the data plane's counters at
// each scrape: nothing is copied into gauges between scrapes, so a scrape
// shows what STATUS and SERVICE_STATS would at that moment.
type stateCollector struct{ s *Server }

// family is a metric family: its description and its type.
type family struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
}

func gauge(name, help string, labels ...string) family {
	return family{prometheus.NewDesc(name, help, labels, nil), prometheus.GaugeValue}
}

func counter(name, help string, labels ...string) family {
	return family{prometheus.NewDesc(name, help, labels, nil), prometheus.CounterValue}
}

func (f family) sample(ch chan<- prometheus.Metric, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(f.desc, f.typ, float64(v), labels...)
}

// serviceLabels name a service: one series per service, so that protocol
// and address (constant for a service) add no series; a service id reused
// by another socket starts new ones, as port did before them.
var serviceLabels = []string{"service", "port", "owner_uid", "manager", "protocol", "address"}

var (
	daemonInfo      = gauge("santa_daemon_info", "santad's version.", "version", "protocol")
	connections     = gauge("santa_connections", "Clients connected.")
	ruleCapacity    = gauge("santa_rule_capacity", "Rules the host can hold.")
	servicesGauge   = gauge("santa_services", "Services attached.")
	rulesGauge      = gauge("santa_rules", "Rules installed on the host.")
	ruleBytes       = gauge("santa_rule_bytes", "Bytes of the rules installed on the host, as the byte quota counts them.")
	journalBytes    = gauge("santa_journal_bytes", "Size of the journal.")
	interfaceInfo   = gauge("santa_interface_info", "Interfaces the data plane runs on, with its XDP mode and whether TC runs.", "interface", "xdp", "tc")
	uidRules        = gauge("santa_uid_rules", "Rules installed on the services of a uid, what its quota counts.", "uid")
	uidRuleBytes    = gauge("santa_uid_rule_bytes", "Bytes of the rules of a uid, as its byte quota counts them.", "uid")
	pathPackets     = counter("santa_path_packets_total", "Packets by the data plane's exit: answered, or why not.", "path")
	serviceTCAnswer = counter("santa_service_tc_answered_total", "Requests answered in TC rather than XDP, by why XDP could not: "+
		"reason checksum, their partial checksum was not verifiable in XDP (loopback, generic XDP); "+
		"too_long, the reply did not fit the XDP frame; "+
		"no_xdp, no XDP program saw them, or the reply could not leave by XDP (a veth whose peer has neither XDP nor GRO).",
		append(slices.Clone(serviceLabels), "reason")...)
	guardRefused = counter("santa_memcached_guard_refused_total", "Answers of guarded rules refused, by reason: "+
		"stale, a generation moved; in_flight, a write in flight, or a connection of the domain lost sync; expired, past the deadline.",
		"domain", "reason")
)

// serviceFamilies are the per-service families, with their values.
var serviceFamilies = []struct {
	family
	value func(serviceRow) uint64
}{
	{counter("santa_service_matched_total", "Requests the data plane answered.", serviceLabels...), func(r serviceRow) uint64 { return r.stats.Matched }},
	{counter("santa_service_passed_total", "Requests passed to the application.", serviceLabels...), func(r serviceRow) uint64 { return r.stats.Passed }},
	{counter("santa_service_fallback_total", "Requests answered in TC rather than XDP, for any reason: the sum of santa_service_tc_answered_total.", serviceLabels...),
		func(r serviceRow) uint64 { return r.stats.Fallback() }},
	{counter("santa_service_bad_csum_total", "Matching requests with a bad checksum, passed.", serviceLabels...), func(r serviceRow) uint64 { return r.stats.BadCsum }},
	{gauge("santa_service_rules", "Rules installed.", serviceLabels...), func(r serviceRow) uint64 { return uint64(r.use.rules) }},
	{gauge("santa_service_rule_bytes", "Bytes of the rules installed, as the byte quota counts them.", serviceLabels...), func(r serviceRow) uint64 { return uint64(r.use.bytes) }},
}

// memcachedFamilies are the counters of a memcached domain
// (model.MemcachedStats), labelled by the id of the service that started it.
var memcachedFamilies = []struct {
	family
	value func(model.MemcachedStats) uint64
}{
	{counter("santa_memcached_writes_total", "Write commands the data plane saw reach memcached.", "domain"), func(s model.MemcachedStats) uint64 { return s.Writes }},
	{counter("santa_memcached_key_bumps_total", "Key generations bumped: a write's arrival, its reply, its connection's end.", "domain"), func(s model.MemcachedStats) uint64 { return s.KeyBumps }},
	{counter("santa_memcached_domain_bumps_total", "Domain generations bumped: flush_all, writes of unknown keys, lost sync.", "domain"), func(s model.MemcachedStats) uint64 { return s.DomainBumps }},
	{counter("santa_memcached_completed_total", "Writes whose reply left memcached.", "domain"), func(s model.MemcachedStats) uint64 { return s.Completed }},
	{counter("santa_memcached_released_total", "Writes in flight when their connection ended.", "domain"), func(s model.MemcachedStats) uint64 { return s.Released }},
	{counter("santa_memcached_overflow_total", "One-key writes beyond a connection's ring, held domain-wide.", "domain"), func(s model.MemcachedStats) uint64 { return s.Overflow }},
	{counter("santa_memcached_lost_total", "Streams (connections, datagrams) whose parsing lost sync.", "domain"), func(s model.MemcachedStats) uint64 { return s.Lost }},
	{counter("santa_memcached_udp_held_total", "UDP writes held one by one until their reply or their deadline.", "domain"), func(s model.MemcachedStats) uint64 { return s.UDPHeld }},
	{counter("santa_memcached_udp_timed_out_total", "UDP writes released at their deadline, no reply of theirs seen.", "domain"), func(s model.MemcachedStats) uint64 { return s.UDPTimedOut }},
	{counter("santa_memcached_udp_domain_total", "UDP writes that held their whole domain: table full, request id in flight.", "domain"), func(s model.MemcachedStats) uint64 { return s.UDPDomain }},
	{counter("santa_memcached_delayed_flush_total", "flush_all with a delay, their domain held until memcached flushed.", "domain"), func(s model.MemcachedStats) uint64 { return s.DelayedFlush }},
	{counter("santa_memcached_refreshed_total", "Sets stored whose value the kernel answers their key's gets with from then.", "domain"), func(s model.MemcachedStats) uint64 { return s.Refreshed }},
	{counter("santa_memcached_fresh_torn_total", "Answers from a set's value dropped: the value changed while it was copied.", "domain"), func(s model.MemcachedStats) uint64 { return s.FreshTorn }},
	{counter("santa_memcached_filled_total", "memcached's replies to gets the kernel answers their key's gets with from then.", "domain"), func(s model.MemcachedStats) uint64 { return s.Filled }},
}

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range []family{daemonInfo, connections, ruleCapacity, servicesGauge, rulesGauge, ruleBytes, journalBytes,
		interfaceInfo, uidRules, uidRuleBytes, pathPackets, serviceTCAnswer, guardRefused} {
		ch <- f.desc
	}
	for _, f := range serviceFamilies {
		ch <- f.desc
	}
	for _, f := range memcachedFamilies {
		ch <- f.desc
	}
}

// serviceRow is what the metrics say of one service.
type serviceRow struct {
	labels []string // serviceLabels' values
	use    usage
	stats  model.ServiceStats
}

// snapshot is the state at one scrape.
type snapshot struct {
	rows         []serviceRow
	domains      []model.ServiceID // the services that started a memcached domain
	mc           []model.MemcachedStats
	uids         map[uint32]usage
	ifaces       []protocol.Interface
	journalBytes int64
}

// snapshot copies the state under the lock, then reads the data plane's
// counters without it: a service may end meanwhile (its counters then
// read as zero).
func (s *Server) snapshot() snapshot {
	s.mu.Lock()
	var snap snapshot
	var ids []model.ServiceID
	for sv := range s.st.byID {
		if sv.parser == (model.Parser{Kind: model.ParserMemcached, Domain: sv.ID}) {
			snap.domains = append(snap.domains, sv.ID)
		}
		ids = append(ids, sv.ID)
		snap.rows = append(snap.rows, serviceRow{use: sv.use, labels: []string{strconv.Itoa(int(sv.ID)),
			strconv.Itoa(int(sv.Info.Local.Port())), strconv.Itoa(int(sv.UID)), sv.manager,
			protocolName(sv.Info.Protocol), sv.Info.Local.Addr().String()}})
	}
	snap.uids = maps.Clone(s.st.usage)
	snap.ifaces, snap.journalBytes = slices.Clone(s.ifaces), s.journal.Size()
	s.mu.Unlock()
	for i, id := range ids {
		snap.rows[i].stats, _ = s.dp.ServiceStats(id)
	}
	snap.mc = make([]model.MemcachedStats, len(snap.domains))
	for i, id := range snap.domains {
		snap.mc[i], _ = s.dp.MemcachedStats(id)
	}
	return snap
}

// protocolName is a service socket's protocol as the metrics label it.
func protocolName(p int) string {
	switch p {
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_TCP:
		return "tcp"
	}
	return strconv.Itoa(p)
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	snap := s.snapshot()
	daemonInfo.sample(ch, 1, s.version, strconv.Itoa(protocol.MaxVersion))
	connections.sample(ch, uint64(s.connections()))
	ruleCapacity.sample(ch, uint64(s.capacity))
	servicesGauge.sample(ch, uint64(len(snap.rows)))
	var total usage
	for _, r := range snap.rows {
		total = total.plus(r.use)
	}
	rulesGauge.sample(ch, uint64(total.rules))
	ruleBytes.sample(ch, uint64(total.bytes))
	journalBytes.sample(ch, uint64(snap.journalBytes))
	for _, i := range snap.ifaces {
		interfaceInfo.sample(ch, 1, i.Name, i.XDP, strconv.FormatBool(i.TC))
	}
	for _, r := range snap.rows {
		for _, f := range serviceFamilies {
			f.sample(ch, f.value(r), r.labels...)
		}
		for _, reason := range []struct {
			name string
			n    uint64
		}{{"checksum", r.stats.TCChecksum}, {"too_long", r.stats.TCTooLong}, {"no_xdp", r.stats.TCNoXDP}} {
			serviceTCAnswer.sample(ch, reason.n, append(slices.Clone(r.labels), reason.name)...)
		}
	}
	for i, d := range snap.domains {
		domain := strconv.Itoa(int(d))
		for _, f := range memcachedFamilies {
			f.sample(ch, f.value(snap.mc[i]), domain)
		}
		for _, r := range []struct {
			reason string
			n      uint64
		}{{"stale", snap.mc[i].GuardStale}, {"in_flight", snap.mc[i].GuardInFlight}, {"expired", snap.mc[i].GuardExpired}} {
			guardRefused.sample(ch, r.n, domain, r.reason)
		}
	}
	for uid, u := range snap.uids {
		uidRules.sample(ch, uint64(u.rules), strconv.Itoa(int(uid)))
		uidRuleBytes.sample(ch, uint64(u.bytes), strconv.Itoa(int(uid)))
	}
	paths, err := s.dp.PathStats()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(pathPackets.desc, err)
		return
	}
	for p, n := range paths {
		pathPackets.sample(ch, n, p)
	}
}
