package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/model"
)

// ServiceStats reads a service's counters.
func (d *Datapath) ServiceStats(id model.ServiceID) (model.ServiceStats, error) {
	if _, err := d.store.service(id); err != nil {
		return model.ServiceStats{}, err
	}
	var per []santaSantaServiceStats
	if err := d.objs.ServiceStats.Lookup(uint32(id), &per); err != nil {
		return model.ServiceStats{}, fmt.Errorf("reading service counters: %w", err)
	}
	var s model.ServiceStats
	fields := serviceCounters(&s)
	for _, c := range per {
		for counter, field := range fields {
			*field += c.Packets[counter]
		}
	}
	return s, nil
}

// serviceCounters are the fields of s that each enum santa_service_counter
// adds up in.
func serviceCounters(s *model.ServiceStats) map[santaSantaServiceCounter]*uint64 {
	return map[santaSantaServiceCounter]*uint64{
		santaSantaServiceCounterSANTA_SVC_MATCHED:     &s.Matched,
		santaSantaServiceCounterSANTA_SVC_PASSED:      &s.Passed,
		santaSantaServiceCounterSANTA_SVC_BAD_CSUM:    &s.BadCsum,
		santaSantaServiceCounterSANTA_SVC_TC_CSUM:     &s.TCChecksum,
		santaSantaServiceCounterSANTA_SVC_TC_TOO_LONG: &s.TCTooLong,
		santaSantaServiceCounterSANTA_SVC_TC_NO_XDP:   &s.TCNoXDP,
	}
}

// PathStats reads the per-exit counters of every program.
func (d *Datapath) PathStats() (model.PathStats, error) {
	out := model.PathStats{}
	for p := santaSantaPath(0); p < santaSantaPathSANTA_PATH_NCOUNTERS; p++ {
		n, err := sumPerCPU(d.objs.PathStats, uint32(p))
		if err != nil {
			return nil, err
		}
		out[pathName(p)] = n
	}
	for p, name := range tcpPathNames {
		n, err := sumPerCPU(d.tcp.objs.TcpPathStats, uint32(p))
		if err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, nil
}

// sumPerCPU reads a per-CPU counter and sums it.
func sumPerCPU(m *ebpf.Map, key uint32) (uint64, error) {
	var per []uint64
	if err := m.Lookup(key, &per); err != nil {
		return 0, fmt.Errorf("reading path counters: %w", err)
	}
	var n uint64
	for _, c := range per {
		n += c
	}
	return n, nil
}

// tcpPathNames are the enum santa_tcp_path names, lower-cased, for reports.
var tcpPathNames = map[santaTcpSantaTcpPath]string{
	santaTcpSantaTcpPathSANTA_TCP_BOUNCED:         "tcp_bounced",
	santaTcpSantaTcpPathSANTA_TCP_ANSWERED:        "tcp_answered",
	santaTcpSantaTcpPathSANTA_TCP_NOT_CONN:        "tcp_not_conn",
	santaTcpSantaTcpPathSANTA_TCP_NO_SERVICE:      "tcp_no_service",
	santaTcpSantaTcpPathSANTA_TCP_PASSING:         "tcp_passing",
	santaTcpSantaTcpPathSANTA_TCP_EMPTY:           "tcp_empty",
	santaTcpSantaTcpPathSANTA_TCP_TOO_LONG:        "tcp_too_long",
	santaTcpSantaTcpPathSANTA_TCP_OUT_OF_ORDER:    "tcp_out_of_order",
	santaTcpSantaTcpPathSANTA_TCP_NO_MATCH:        "tcp_no_match",
	santaTcpSantaTcpPathSANTA_TCP_BUSY:            "tcp_busy",
	santaTcpSantaTcpPathSANTA_TCP_ERROR:           "tcp_error",
	santaTcpSantaTcpPathSANTA_TCP_REPLY_FALLBACK:  "tcp_reply_fallback",
	santaTcpSantaTcpPathSANTA_TCP_REPLY_BROKEN:    "tcp_reply_broken",
	santaTcpSantaTcpPathSANTA_TCP_NEW_CONN:        "tcp_new_conn",
	santaTcpSantaTcpPathSANTA_TCP_CONN_FULL:       "tcp_conn_full",
	santaTcpSantaTcpPathSANTA_TCP_CONN_QUOTA:      "tcp_conn_quota",
	santaTcpSantaTcpPathSANTA_TCP_APP_RECEIVING:   "tcp_app_receiving",
	santaTcpSantaTcpPathSANTA_TCP_FIN:             "tcp_fin",
	santaTcpSantaTcpPathSANTA_TCP_FIN_HELD:        "tcp_fin_held",
	santaTcpSantaTcpPathSANTA_TCP_NO_BUFFER:       "tcp_no_buffer",
	santaTcpSantaTcpPathSANTA_TCP_REPLY_REST:      "tcp_reply_rest",
	santaTcpSantaTcpPathSANTA_TCP_REST_BEFORE_APP: "tcp_rest_before_app",
}

// pathNames are the enum santa_path names, lower-cased, for reports.
var pathNames = map[santaSantaPath]string{
	santaSantaPathSANTA_PATH_ANSWERED:           "answered",
	santaSantaPathSANTA_PATH_NOT_IP:             "not_ip",
	santaSantaPathSANTA_PATH_NOT_UDP:            "not_udp",
	santaSantaPathSANTA_PATH_FRAGMENT:           "fragment",
	santaSantaPathSANTA_PATH_IP_OPTIONS:         "ip_options",
	santaSantaPathSANTA_PATH_BAD_LENGTH:         "bad_length",
	santaSantaPathSANTA_PATH_NOT_UNICAST:        "not_unicast",
	santaSantaPathSANTA_PATH_TOO_LONG:           "too_long",
	santaSantaPathSANTA_PATH_NO_SOCKET:          "no_socket",
	santaSantaPathSANTA_PATH_NOT_SERVICE:        "not_service",
	santaSantaPathSANTA_PATH_SERVICE_PASS:       "service_pass",
	santaSantaPathSANTA_PATH_FALLBACK_CSUM:      "fallback_checksum",
	santaSantaPathSANTA_PATH_SEEN_BY_XDP:        "seen_by_xdp",
	santaSantaPathSANTA_PATH_TX_ERROR:           "tx_error",
	santaSantaPathSANTA_PATH_BAD_IP_CSUM:        "bad_ip_csum",
	santaSantaPathSANTA_PATH_NOT_FOR_HOST:       "not_for_host",
	santaSantaPathSANTA_PATH_NOT_LOCAL:          "not_local",
	santaSantaPathSANTA_PATH_MARTIAN:            "martian",
	santaSantaPathSANTA_PATH_OVER_MTU:           "over_mtu",
	santaSantaPathSANTA_PATH_PROBE:              "probe",
	santaSantaPathSANTA_PATH_FALLBACK_TOO_LONG:  "fallback_too_long",
	santaSantaPathSANTA_PATH_FALLBACK_NO_XDP_TX: "fallback_no_xdp_tx",
	santaSantaPathSANTA_PATH_SOURCE_PORT:        "source_port",
}

func pathName(p santaSantaPath) string {
	if n, ok := pathNames[p]; ok {
		return n
	}
	return fmt.Sprintf("path_%d", p)
}

// resetRuleStats zeroes a rule id's counters on every CPU, for its next
// rule.
func (st *store) resetRuleStats(id model.RuleID) error {
	zero := make([]santaSantaRuleStats, ebpf.MustPossibleCPU())
	if err := st.objs.RuleStats.Put(uint32(id), zero); err != nil {
		return fmt.Errorf("resetting rule counters: %w", err)
	}
	return nil
}

// resetServiceStats zeroes a service id's counters on every CPU, for its
// next service.
func (st *store) resetServiceStats(id model.ServiceID) error {
	zero := make([]santaSantaServiceStats, ebpf.MustPossibleCPU())
	if err := st.objs.ServiceStats.Put(uint32(id), zero); err != nil {
		return fmt.Errorf("resetting service counters: %w", err)
	}
	return nil
}
