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
	var ids []model.ServiceID
	for js := range s.st.journaled {
		sv := s.st.services[js.ID]
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
