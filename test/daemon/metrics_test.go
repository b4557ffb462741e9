package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// sampleLine is a sample of the text format: name, labels (in the order
// of their names), value (a float: 1.048576e+06, NaN).
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

func TestMetrics(t *testing.T) {
	const addr = "127.0.0.1:9477" // in the test's own namespace: no clash
	e := newEnv(t, "m", "", "-metrics-addr", addr)
	c, _, svc := e.attachedUDP(t)
	if _, err := c.AddRules(svc.ServiceID, []rule.Rule{pingRule}); err != nil {
		t.Fatal(err)
	}
	q := e.dialUDP(t, svc.Port)
	for range 3 {
		if got, err := santadtest.Ask(q, []byte("ping"), time.Second); err != nil || string(got) != "pong" {
			t.Fatalf("ping: %q, %v", got, err)
		}
	}

	// The HTTP client dials from inside the namespace.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
			err = e.ns.Do(func() error {
				conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		}}}
	get := func(path string) (*http.Response, string) {
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(body)
	}
	if resp, ok := get("/healthz"); resp.StatusCode != 200 || ok != "ok\n" {
		t.Errorf("GET /healthz: %s %q", resp.Status, ok)
	}
	resp, body := get("/metrics")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.Contains(ct, "version=0.0.4") {
		t.Fatalf("GET /metrics: %s, Content-Type %q", resp.Status, ct)
	}

	samples := map[string]float64{} // by name and labels
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("not a sample: %q", line)
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Errorf("not a value: %q", line)
		}
		samples[m[1]+m[2]] = v
	}
	// The manager is the client that attached it: this test binary.
	labels := fmt.Sprintf(`{address="127.0.0.1",manager="%s",owner_uid="0",port="%d",protocol="udp",service="%d"}`,
		filepath.Base(os.Args[0]), svc.Port, svc.ServiceID)
	for _, want := range []struct {
		sample string
		min    float64
	}{
		{"santa_service_matched_total" + labels, 3},
		{"santa_service_rules" + labels, 1},
		{"santa_service_rule_bytes" + labels, 8},
		{"santa_rules", 1},
		{"santa_services", 1},
		{"santa_connections", 1},
		{`santa_path_packets_total{path="answered"}`, 3},
		{`santa_interface_info{interface="lo",tc="true",xdp="generic"}`, 1},
		{`santa_uid_rules{uid="0"}`, 1},
		{`santa_requests_total{type="ADD_RULES"}`, 1},
		{`santa_errors_total{reason="journal_append"}`, 0},
		{"process_resident_memory_bytes", 1},
		{"go_goroutines", 1},
	} {
		if v, ok := samples[want.sample]; !ok || v < want.min {
			t.Errorf("%s = %g (present %v); want at least %g", want.sample, v, ok, want.min)
		}
	}
	if !strings.Contains(body, "santa_daemon_info{protocol=") {
		t.Error("no santa_daemon_info")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
}
