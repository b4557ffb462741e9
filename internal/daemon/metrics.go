package daemon

import (
	"net/http"

	"github.com/santa-offload/santa/internal/metricserver"
)

// The metrics listener serves GET /metrics (Prometheus) and GET /healthz.
// What santad's state and the data plane hold is read at each scrape
// (stateCollector); what happens and is kept nowhere else (requests,
// refusals, errors) is counted as it happens (counters).

// serveMetrics serves the metrics handler on addr until stop is called.
func (s *Server) serveMetrics(addr string) (stop func(), err error) {
	return metricserver.Serve(addr, s.metricsHandler())
}

// metricsHandler answers GET /metrics and GET /healthz.
func (s *Server) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricserver.Handler(s.log, stateCollector{s}, s.counters))
	mux.HandleFunc("GET /healthz", s.healthz)
	return mux
}
