package daemon

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// unreadablePaths is a data plane whose path counters cannot be read.
type unreadablePaths struct{ *fakeDP }

func (unreadablePaths) PathStats() (model.PathStats, error) {
	return nil, errors.New("reading path counters: bad file descriptor")
}

// GET /healthz: 200 only while santad serves, its data plane reads and
// runs on an interface; else 503 with the reason.
func TestHealthz(t *testing.T) {
	s := newTestServer(t, nil)
	want := func(status int, body string) {
		t.Helper()
		if got, b := s.get(t, "/healthz"); got != status || b != body+"\n" {
			t.Errorf("GET /healthz: %d %q; want %d %q", got, b, status, body)
		}
	}
	want(http.StatusServiceUnavailable, "santad is not serving clients: starting or stopping")
	s.serving.Store(true)
	want(http.StatusServiceUnavailable, "the data plane runs on no interface")
	s.setInterfaces([]protocol.Interface{{Name: "eth0", XDP: "none"}})
	want(http.StatusServiceUnavailable, "the data plane runs on no interface")
	s.setInterfaces([]protocol.Interface{{Name: "eth0", XDP: "none"}, {Name: "lo", XDP: "none", TC: true}})
	want(http.StatusOK, "ok")
	s.Server.dp = unreadablePaths{s.dp}
	want(http.StatusServiceUnavailable, "the data plane cannot be read: reading path counters: bad file descriptor")
	// The metrics still serve, without the family that cannot be read.
	if out := s.scrape(t); !strings.Contains(out, "\nsanta_services 0\n") || strings.Contains(out, "santa_path_packets_total") {
		t.Errorf("metrics with unreadable path counters:\n%s", out)
	}
	s.Server.dp = s.dp
	s.serving.Store(false)
	want(http.StatusServiceUnavailable, "santad is not serving clients: starting or stopping")
}
