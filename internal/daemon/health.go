package daemon

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// healthz answers 200 "ok" while santad serves clients and its data plane
// is loaded, readable and attached to an interface; else 503 with the
// reason, for a liveness or readiness probe.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if why := s.unhealthy(); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, why)
		return
	}
	fmt.Fprintln(w, "ok")
}

// unhealthy is why santad is not healthy, or "".
func (s *Server) unhealthy() string {
	if !s.serving.Load() {
		return "santad is not serving clients: starting or stopping"
	}
	if _, err := s.dp.PathStats(); err != nil {
		return fmt.Sprintf("the data plane cannot be read: %v", err)
	}
	s.mu.Lock()
	ifaces := slices.Clone(s.ifaces)
	s.mu.Unlock()
	if !slices.ContainsFunc(ifaces, func(i protocol.Interface) bool { return i.XDP != string(model.XDPNone) || i.TC }) {
		return "the data plane runs on no interface"
	}
	return ""
}
