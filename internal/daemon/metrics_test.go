package daemon

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// get answers GET path from the metrics listener, over a real HTTP
// connection.
func (s *testServer) get(t *testing.T, path string) (status int, body string) {
	t.Helper()
	hs := httptest.NewServer(s.metricsHandler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if path == "/metrics" && !strings.Contains(resp.Header.Get("Content-Type"), "version=0.0.4") {
		t.Errorf("GET /metrics: Content-Type %q", resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, string(b)
}

// scrape is GET /metrics, which must succeed.
func (s *testServer) scrape(t *testing.T) string {
	t.Helper()
	status, body := s.get(t, "/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", status, body)
	}
	return body
}

// wantLines fails the test for each line of want missing from the
// exposition out.
func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, line := range want {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("no %q in the metrics", line)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", out)
	}
}

// The exposition keeps every name and label of the hand-written one,
// adds protocol and address to a service's, and counts requests and
// refusals by type and errno, whatever a client sends.
func TestMetrics(t *testing.T) {
	s := newTestServer(t, nil)
	s.setInterfaces([]protocol.Interface{{Ifindex: 1, Name: "lo", XDP: "generic", TC: true}})
	a := s.connectV2(t, alice)
	svc := a.attach()
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{testRule("ping", 4)}})
	port := s.service(svc).Info.Local.Port()
	b := s.connectV2(t, bob)
	b.refused(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{testRule("pong", 4)}}, syscall.EPERM, "belongs to uid 1000")
	// A reply sent as a request: refused, and the connection closed.
	bad := s.connect(t, alice, false)
	reply, _ := protocol.Encode(1, 1, &protocol.DetachReply{})
	bad.send(reply)
	if e, ok := bad.recv().(*protocol.Error); !ok || e.Code != syscall.EPROTO {
		t.Fatalf("a reply as a request: %v", e)
	}
	bad.closed()

	labels := fmt.Sprintf(`address="127.0.0.1",manager="agent",owner_uid="1000",port="%d",protocol="udp",service="%d"`, port, svc)
	wantLines(t, s.scrape(t),
		`santa_daemon_info{protocol="7",version="`+s.version+`"} 1`,
		`santa_rules 1`,
		`santa_services 1`,
		`santa_rule_bytes 8`,
		`santa_rule_capacity 1.048576e+06`, // the format's floats
		`santa_interface_info{interface="lo",tc="true",xdp="generic"} 1`,
		`santa_service_matched_total{`+labels+`} 3`,
		`santa_service_passed_total{`+labels+`} 1`,
		`santa_service_fallback_total{`+labels+`} 0`,
		`santa_service_rules{`+labels+`} 1`,
		fmt.Sprintf(`santa_service_tc_answered_total{address="127.0.0.1",manager="agent",owner_uid="1000",port="%d",protocol="udp",reason="too_long",service="%d"} 0`, port, svc),
		`santa_uid_rules{uid="1000"} 1`,
		`santa_path_packets_total{path="answered"} 3`,
		`santa_requests_total{type="HELLO"} 2`,
		`santa_requests_total{type="ADD_RULES"} 2`,
		`santa_requests_refused_total{reason="EPERM",type="ADD_RULES"} 1`,
		`santa_requests_total{type="invalid"} 1`,
		`santa_requests_refused_total{reason="EPROTO",type="invalid"} 1`,
		`santa_errors_total{reason="journal_append"} 0`,
		`santa_connections_refused_total{reason="quota"} 0`,
		// The Go runtime's and the process's collectors.
		`# TYPE go_goroutines gauge`,
		`# TYPE process_resident_memory_bytes gauge`,
		`# TYPE process_cpu_seconds_total counter`,
	)
}

// A journal that cannot be appended to is counted, and so is a snapshot
// that cannot be written either, which the client hears of as EIO.
func TestMetricsJournalErrors(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connectV2(t, alice)
	svc := a.attach()
	closeJournal := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.journal.Close()
	}
	closeJournal()
	a.ok(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{testRule("a", 4)}}) // saved by a snapshot
	closeJournal()
	if err := os.RemoveAll(s.dir); err != nil {
		t.Fatal(err)
	}
	a.refused(&protocol.AddRules{ServiceID: svc, Rules: []rule.Rule{testRule("b", 4)}}, syscall.EIO, "could not save it")
	wantLines(t, s.scrape(t),
		`santa_errors_total{reason="journal_append"} 2`,
		`santa_errors_total{reason="journal_compact"} 1`,
		`santa_requests_refused_total{reason="EIO",type="ADD_RULES"} 1`,
		`santa_rules 2`,
	)
}
