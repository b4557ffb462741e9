package daemon

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// Prometheus metrics in the text exposition format 0.0.4, written by hand:
// a handful of families needs no client library.

const metricsType = "text/plain; version=0.0.4; charset=utf-8"

// serveMetrics serves GET /metrics on addr until stop is called.
func (s *Server) serveMetrics(addr string) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", metricsType)
		if err := s.writeMetrics(w); err != nil {
			s.log.Warn("writing metrics", "err", err)
		}
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(l)
	return func() { hs.Close() }, nil
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
			"port", strconv.Itoa(int(sv.Info.Local.Port())), "owner_uid", strconv.Itoa(int(sv.UID))}})
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

	w := promWriter{bufio.NewWriter(out)}
	w.family("santa_daemon_info", "gauge", "santad's version.")
	w.sample("santa_daemon_info", 1, "version", s.version, "protocol", strconv.Itoa(protocol.MaxVersion))
	w.gauge("santa_connections", "Clients connected.", uint64(s.connections()))
	w.gauge("santa_rule_capacity", "Rules the host can hold.", uint64(s.capacity))
	w.gauge("santa_services", "Services attached.", uint64(len(rows)))
	var total usage
	for _, r := range rows {
		total = total.plus(r.use)
	}
	w.gauge("santa_rules", "Rules installed on the host.", uint64(total.rules))
	w.gauge("santa_rule_bytes", "Pattern and reply bytes of the rules installed on the host.", uint64(total.bytes))
	w.gauge("santa_journal_bytes", "Size of the journal.", uint64(journalBytes))

	w.family("santa_interface_info", "gauge", "Interfaces the data plane runs on, with its XDP mode and whether TC runs.")
	for _, i := range ifaces {
		w.sample("santa_interface_info", 1, "interface", i.Name, "xdp", i.XDP, "tc", strconv.FormatBool(i.TC))
	}
	serviceFamilies := []struct {
		name, typ, help string
		value           func(serviceRow) uint64
	}{
		{"santa_service_matched_total", "counter", "Requests the data plane answered.", func(r serviceRow) uint64 { return r.stats.Matched }},
		{"santa_service_passed_total", "counter", "Requests passed to the application.", func(r serviceRow) uint64 { return r.stats.Passed }},
		{"santa_service_fallback_total", "counter", "Requests XDP matched and left to TC: their checksum could not be verified in XDP (partial, from a local sender, or wrong), or the reply did not fit the frame.", func(r serviceRow) uint64 { return r.stats.Fallback }},
		{"santa_service_bad_csum_total", "counter", "Matching requests with a bad checksum, passed.", func(r serviceRow) uint64 { return r.stats.BadCsum }},
		{"santa_service_rules", "gauge", "Rules installed.", func(r serviceRow) uint64 { return uint64(r.use.rules) }},
		{"santa_service_rule_bytes", "gauge", "Pattern and reply bytes of the rules installed.", func(r serviceRow) uint64 { return uint64(r.use.bytes) }},
	}
	for _, f := range serviceFamilies {
		w.family(f.name, f.typ, f.help)
		for _, r := range rows {
			w.sample(f.name, f.value(r), r.labels...)
		}
	}
	w.family("santa_uid_rules", "gauge", "Rules installed on the services of a uid, what its quota counts.")
	for _, uid := range slices.Sorted(maps.Keys(uids)) {
		w.sample("santa_uid_rules", uint64(uids[uid].rules), "uid", strconv.Itoa(int(uid)))
	}
	w.family("santa_uid_rule_bytes", "gauge", "Pattern and reply bytes of the rules of a uid, what its quota counts.")
	for _, uid := range slices.Sorted(maps.Keys(uids)) {
		w.sample("santa_uid_rule_bytes", uint64(uids[uid].bytes), "uid", strconv.Itoa(int(uid)))
	}
	w.family("santa_path_packets_total", "counter", "Packets by the data plane's exit: answered, or why not.")
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		w.sample("santa_path_packets_total", paths[p], "path", p)
	}
	return w.Flush()
}

type promWriter struct{ *bufio.Writer }

func (w promWriter) family(name, typ, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (w promWriter) gauge(name, help string, v uint64) {
	w.family(name, "gauge", help)
	w.sample(name, v)
}

// sample writes one line; labels are name, value pairs.
func (w promWriter) sample(name string, v uint64, labels ...string) {
	w.WriteString(name)
	for i := 0; i+1 < len(labels); i += 2 {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		fmt.Fprintf(w, "%s%s=\"%s\"", sep, labels[i], labelEscaper.Replace(labels[i+1]))
	}
	if len(labels) > 0 {
		w.WriteByte('}')
	}
	fmt.Fprintf(w, " %d\n", v)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
