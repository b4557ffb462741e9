package daemon

import (
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/promtext"
	"github.com/santa-offload/santa/internal/protocol"
)

// serveMetrics serves GET /metrics on addr until stop is called.
func (s *Server) serveMetrics(addr string) (stop func(), err error) {
	return promtext.Serve(addr, s.writeMetrics, s.log)
}

// serviceRow is what the metrics say of one service.
type serviceRow struct {
	labels []string
	use    usage
	stats  model.ServiceStats
}

func (s *Server) writeMetrics(out io.Writer) error {
	s.mu.Lock()
	var rows []serviceRow
	var ids, domains []model.ServiceID
	for sv := range s.st.byID {
		if sv.parser == (model.Parser{Kind: model.ParserMemcached, Domain: sv.ID}) {
			domains = append(domains, sv.ID)
		}
		ids = append(ids, sv.ID)
		rows = append(rows, serviceRow{use: sv.use, labels: []string{"service", strconv.Itoa(int(sv.ID)),
			"port", strconv.Itoa(int(sv.Info.Local.Port())), "owner_uid", strconv.Itoa(int(sv.UID)), "manager", sv.manager}})
	}
	uids := make(map[uint32]usage, len(s.st.usage))
	for uid, u := range s.st.usage {
		uids[uid] = u
	}
	ifaces, journalBytes := slices.Clone(s.ifaces), s.journal.Size()
	s.mu.Unlock()
	// Counters are read without the lock: a service may end meanwhile.
	for i, id := range ids {
		rows[i].stats, _ = s.dp.ServiceStats(id)
	}
	mc := make([]model.MemcachedStats, len(domains))
	for i, id := range domains {
		mc[i], _ = s.dp.MemcachedStats(id)
	}
	paths, err := s.dp.PathStats()
	if err != nil {
		return err
	}

	w := promtext.NewWriter(out)
	w.Family("santa_daemon_info", "gauge", "santad's version.")
	w.Sample("santa_daemon_info", 1, "version", s.version, "protocol", strconv.Itoa(protocol.MaxVersion))
	w.Gauge("santa_connections", "Clients connected.", uint64(s.connections()))
	w.Gauge("santa_rule_capacity", "Rules the host can hold.", uint64(s.capacity))
	w.Gauge("santa_services", "Services attached.", uint64(len(rows)))
	var total usage
	for _, r := range rows {
		total = total.plus(r.use)
	}
	w.Gauge("santa_rules", "Rules installed on the host.", uint64(total.rules))
	w.Gauge("santa_rule_bytes", "Pattern and reply bytes of the rules installed on the host.", uint64(total.bytes))
	w.Gauge("santa_journal_bytes", "Size of the journal.", uint64(journalBytes))

	w.Family("santa_interface_info", "gauge", "Interfaces the data plane runs on, with its XDP mode and whether TC runs.")
	for _, i := range ifaces {
		w.Sample("santa_interface_info", 1, "interface", i.Name, "xdp", i.XDP, "tc", strconv.FormatBool(i.TC))
	}
	serviceFamilies := []struct {
		name, typ, help string
		value           func(serviceRow) uint64
	}{
		{"santa_service_matched_total", "counter", "Requests the data plane answered.", func(r serviceRow) uint64 { return r.stats.Matched }},
		{"santa_service_passed_total", "counter", "Requests passed to the application.", func(r serviceRow) uint64 { return r.stats.Passed }},
		{"santa_service_fallback_total", "counter", "Requests answered in TC rather than XDP, for any reason: the sum of santa_service_tc_answered_total.", func(r serviceRow) uint64 { return r.stats.Fallback() }},
		{"santa_service_bad_csum_total", "counter", "Matching requests with a bad checksum, passed.", func(r serviceRow) uint64 { return r.stats.BadCsum }},
		{"santa_service_rules", "gauge", "Rules installed.", func(r serviceRow) uint64 { return uint64(r.use.rules) }},
		{"santa_service_rule_bytes", "gauge", "Pattern and reply bytes of the rules installed.", func(r serviceRow) uint64 { return uint64(r.use.bytes) }},
	}
	for _, f := range serviceFamilies {
		w.Family(f.name, f.typ, f.help)
		for _, r := range rows {
			w.Sample(f.name, f.value(r), r.labels...)
		}
	}
	w.Family("santa_service_tc_answered_total", "counter", "Requests answered in TC rather than XDP, by why XDP could not: "+
		"reason checksum, their partial checksum was not verifiable in XDP (loopback, generic XDP); "+
		"too_long, the reply did not fit the XDP frame; "+
		"no_xdp, no XDP program saw them, or the reply could not leave by XDP (a veth whose peer has neither XDP nor GRO).")
	for _, r := range rows {
		for _, reason := range []struct {
			name string
			n    uint64
		}{{"checksum", r.stats.TCChecksum}, {"too_long", r.stats.TCTooLong}, {"no_xdp", r.stats.TCNoXDP}} {
			w.Sample("santa_service_tc_answered_total", reason.n, append(slices.Clone(r.labels), "reason", reason.name)...)
		}
	}
	writeMemcachedMetrics(w, domains, mc)
	w.Family("santa_uid_rules", "gauge", "Rules installed on the services of a uid, what its quota counts.")
	for _, uid := range slices.Sorted(maps.Keys(uids)) {
		w.Sample("santa_uid_rules", uint64(uids[uid].rules), "uid", strconv.Itoa(int(uid)))
	}
	w.Family("santa_uid_rule_bytes", "gauge", "Pattern and reply bytes of the rules of a uid, what its quota counts.")
	for _, uid := range slices.Sorted(maps.Keys(uids)) {
		w.Sample("santa_uid_rule_bytes", uint64(uids[uid].bytes), "uid", strconv.Itoa(int(uid)))
	}
	w.Family("santa_path_packets_total", "counter", "Packets by the data plane's exit: answered, or why not.")
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		w.Sample("santa_path_packets_total", paths[p], "path", p)
	}
	return w.Flush()
}

// memcachedFamilies are the counters of a memcached domain
// (model.MemcachedStats), by the name of their family.
var memcachedFamilies = []struct {
	name, help string
	value      func(model.MemcachedStats) uint64
}{
	{"santa_memcached_writes_total", "Write commands the data plane saw reach memcached.", func(s model.MemcachedStats) uint64 { return s.Writes }},
	{"santa_memcached_key_bumps_total", "Key generations bumped: a write's arrival, its reply, its connection's end.", func(s model.MemcachedStats) uint64 { return s.KeyBumps }},
	{"santa_memcached_domain_bumps_total", "Domain generations bumped: flush_all, writes of unknown keys, lost sync.", func(s model.MemcachedStats) uint64 { return s.DomainBumps }},
	{"santa_memcached_completed_total", "Writes whose reply left memcached.", func(s model.MemcachedStats) uint64 { return s.Completed }},
	{"santa_memcached_released_total", "Writes in flight when their connection ended.", func(s model.MemcachedStats) uint64 { return s.Released }},
	{"santa_memcached_overflow_total", "One-key writes beyond a connection's ring, held domain-wide.", func(s model.MemcachedStats) uint64 { return s.Overflow }},
	{"santa_memcached_lost_total", "Streams (connections, datagrams) whose parsing lost sync.", func(s model.MemcachedStats) uint64 { return s.Lost }},
	{"santa_memcached_udp_held_total", "UDP writes held one by one until their reply or their deadline.", func(s model.MemcachedStats) uint64 { return s.UDPHeld }},
	{"santa_memcached_udp_timed_out_total", "UDP writes released at their deadline, no reply of theirs seen.", func(s model.MemcachedStats) uint64 { return s.UDPTimedOut }},
	{"santa_memcached_udp_domain_total", "UDP writes that held their whole domain: table full, request id in flight.", func(s model.MemcachedStats) uint64 { return s.UDPDomain }},
	{"santa_memcached_delayed_flush_total", "flush_all with a delay, their domain held until memcached flushed.", func(s model.MemcachedStats) uint64 { return s.DelayedFlush }},
}

// writeMemcachedMetrics writes the counters of each domain, by the id of
// the service that started it.
func writeMemcachedMetrics(w promtext.Writer, domains []model.ServiceID, stats []model.MemcachedStats) {
	for _, f := range memcachedFamilies {
		w.Family(f.name, "counter", f.help)
		for i, d := range domains {
			w.Sample(f.name, f.value(stats[i]), "domain", strconv.Itoa(int(d)))
		}
	}
	w.Family("santa_memcached_guard_refused_total", "counter", "Answers of guarded rules refused, by reason: "+
		"stale, a generation moved; in_flight, a write in flight, or a connection of the domain lost sync; expired, past the deadline.")
	for i, d := range domains {
		for _, r := range []struct {
			reason string
			n      uint64
		}{{"stale", stats[i].GuardStale}, {"in_flight", stats[i].GuardInFlight}, {"expired", stats[i].GuardExpired}} {
			w.Sample("santa_memcached_guard_refused_total", r.n, "domain", strconv.Itoa(int(d)), "reason", r.reason)
		}
	}
}
