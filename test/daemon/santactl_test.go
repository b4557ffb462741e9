package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/cli"
)

// santactl against the real santad, as an operator uses it: attach a
// running server's socket by its port, add rules from a file, watch the
// kernel answer and the counters count, delete them by the same file,
// detach. The "server" is a socket of this test that never reads.
func TestSantactl(t *testing.T) {
	e := newEnv(t, "c", "")
	app := e.listenUDP(t)
	port := portOf(app)
	ctl := func(out any, args ...string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args = append([]string{"-socket", e.d.Socket, "-json"}, args...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cli.Run(ctx, args, &stdout, &stderr); err != nil {
			t.Fatalf("santactl %v: %v\n%s", args, err, stderr.String())
		}
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			t.Fatalf("santactl %v printed %q: %v", args, stdout.String(), err)
		}
	}

	var svc struct {
		ServiceID uint32 `json:"service_id"`
		Port      uint16 `json:"port"`
	}
	ctl(&svc, "attach", "-port", fmt.Sprint(port), "-addr", "127.0.0.1", "-netns", "/run/netns/"+e.ns.Name)
	if svc.Port != port {
		t.Fatalf("attach -port %d attached port %d", port, svc.Port)
	}
	id := fmt.Sprint(svc.ServiceID)

	file := filepath.Join(t.TempDir(), "rules.json")
	rulesJSON := `{"rules": [
		{"condition": {"text": "Hello"}, "processors": [{"put": {"text": "COMSYS"}}]},
		{"condition": {"offset": 2, "text": "ping"}, "processors": [{"put": {"offset": 2, "text": "pong"}}, {"copy": {"from": 0, "length": 2, "to": 0}}]}
	]}`
	if err := os.WriteFile(file, []byte(rulesJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	var added struct {
		RuleIDs []uint32 `json:"rule_ids"`
	}
	ctl(&added, "add", id, file)
	if len(added.RuleIDs) != 2 {
		t.Fatalf("add installed rules %v, want 2", added.RuleIDs)
	}

	q := e.dialUDP(t, port)
	for range 3 {
		expect(t, q, "Hello", "COMSYS")
	}
	expect(t, q, "\x12\x34ping", "\x12\x34pong")

	var stats struct {
		Matched  uint64 `json:"matched"`
		Counters []struct {
			ID   uint32 `json:"id"`
			Hits uint64 `json:"hits"`
		} `json:"rule_counters"`
		Paths map[string]uint64 `json:"paths"`
	}
	ctl(&stats, "stats", id)
	if stats.Matched != 4 || len(stats.Counters) != 2 || stats.Counters[0].ID != added.RuleIDs[0] || stats.Counters[0].Hits != 3 || stats.Counters[1].Hits != 1 {
		t.Errorf("stats: matched %d, rules %+v; want 4 matched, rule %d 3 hits, the other 1", stats.Matched, stats.Counters, added.RuleIDs[0])
	}
	// The host's path counters: this santad's own netns and pins, so its
	// four answers are all there are; TCP's are listed, at 0.
	if n, ok := stats.Paths["tcp_answered"]; stats.Paths["answered"] != 4 || !ok || n != 0 {
		t.Errorf("stats: paths %v; want answered 4, tcp_answered 0", stats.Paths)
	}

	var status struct {
		Rules      uint32 `json:"rules"`
		Interfaces []struct {
			Name string `json:"name"`
			TC   bool   `json:"tc"`
		} `json:"interfaces"`
	}
	ctl(&status, "status")
	if status.Rules != 2 || len(status.Interfaces) != 1 || status.Interfaces[0].Name != "lo" || !status.Interfaces[0].TC {
		t.Errorf("status: %+v; want 2 rules, attached to lo with TC", status)
	}

	// Deleted by the file that added them: "Hello" reaches the server.
	var deleted struct {
		RuleIDs []uint32 `json:"rule_ids"`
	}
	ctl(&deleted, "delete", id, "-f", file)
	if len(deleted.RuleIDs) != 2 {
		t.Fatalf("delete -f removed %v, want both rules", deleted.RuleIDs)
	}
	if _, err := q.Write([]byte("Hello")); err != nil {
		t.Fatal(err)
	}
	app.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 64)
	if n, err := app.Read(buf); err != nil || string(buf[:n]) != "Hello" {
		t.Fatalf("after delete the server got %q, %v; want \"Hello\"", buf[:n], err)
	}

	var detached struct {
		ServiceID uint32 `json:"service_id"`
	}
	ctl(&detached, "detach", id)
	var services struct {
		Services []struct{} `json:"services"`
	}
	ctl(&services, "services")
	if len(services.Services) != 0 {
		t.Errorf("after detach santad lists %d services", len(services.Services))
	}
}
