package cli

import (
	"strings"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

// stats ends with the host's path counters: the table those not 0, the
// JSON all of them; from a santad without PATH_STATS, neither.
func TestStatsPaths(t *testing.T) {
	f, path := withService(t)
	f.mu.Lock()
	f.paths = []protocol.PathCount{{Name: "answered", Count: 150}, {Name: "passed", Count: 0}, {Name: "tcp_fin", Count: 2}}
	f.mu.Unlock()
	stdout, stderr, code := santactl(t, path, "stats", "-top", "1", "7")
	if code != 0 || stderr != "" {
		t.Fatalf("stats: status %d, stderr %q", code, stderr)
	}
	if want := "any\n\nPATH (HOST)  PACKETS\nanswered     150\ntcp_fin      2\n"; !strings.HasSuffix(stdout, want) {
		t.Errorf("stats ends\n%s\nwant it to end\n%s", stdout, want)
	}
	stdout, _, _ = santactl(t, path, "-json", "stats", "-top", "0", "7")
	if want := "  \"paths\": {\n    \"answered\": 150,\n    \"passed\": 0,\n    \"tcp_fin\": 2\n  }\n}\n"; !strings.HasSuffix(stdout, want) {
		t.Errorf("stats -json ends\n%s\nwant it to end\n%s", stdout, want)
	}
}
