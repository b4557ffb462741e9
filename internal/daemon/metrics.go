package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The metrics listener serves GET /metrics (Prometheus) and GET /healthz.
// What santad's state and the data plane hold is read at each scrape
// (stateCollector); what happens and is kept nowhere else (requests,
// refusals, errors) is counted as it happens (counters).

// serveMetrics serves the metrics handler on addr until stop is called.
func (s *Server) serveMetrics(addr string) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	hs := &http.Server{Handler: s.metricsHandler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(l)
	return func() { hs.Close() }, nil
}

// metricsHandler answers GET /metrics and GET /healthz.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		stateCollector{s}, s.counters)
	mux := http.NewServeMux()
	// A family that cannot be read (the data plane's path counters, say) is
	// logged and left out; the others are still served.
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /healthz", s.healthz)
	return mux
}
