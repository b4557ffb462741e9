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

// sampleLine is a sample of the text format: name, labels, value.
var sampleLine = regexp.MustCompile(`^([a-z_]+)(\{[^}]*\})? ([0-9]+)$`)

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
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.Contains(ct, "version=0.0.4") {
		t.Fatalf("GET /metrics: %s, Content-Type %q", resp.Status, ct)
	}

	samples := map[string]uint64{} // by name and labels
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("not a sample: %q", line)
			continue
		}
		v, _ := strconv.ParseUint(m[3], 10, 64)
		samples[m[1]+m[2]] = v
	}
	// The manager is the client that attached it: this test binary.
	labels := fmt.Sprintf(`{service="%d",port="%d",owner_uid="0",manager="%s"}`, svc.ServiceID, svc.Port, filepath.Base(os.Args[0]))
	for _, want := range []struct {
		sample string
		min    uint64
	}{
		{"santa_service_matched_total" + labels, 3},
		{"santa_service_rules" + labels, 1},
		{"santa_service_rule_bytes" + labels, 8},
		{"santa_rules", 1},
		{"santa_services", 1},
		{"santa_connections", 1},
		{`santa_path_packets_total{path="answered"}`, 3},
		{`santa_interface_info{interface="lo",xdp="generic",tc="true"}`, 1},
		{`santa_uid_rules{uid="0"}`, 1},
	} {
		if v, ok := samples[want.sample]; !ok || v < want.min {
			t.Errorf("%s = %d (present %v); want at least %d", want.sample, v, ok, want.min)
		}
	}
	if !strings.Contains(string(body), "santa_daemon_info{version=") {
		t.Error("no santa_daemon_info")
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
}
