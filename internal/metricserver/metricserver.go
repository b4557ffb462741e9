// Package metricserver serves Prometheus metrics over HTTP for santad and
// the offload agents, with the Prometheus Go client (client_golang): the
// text format, content negotiation, compression and the Go runtime's and
// the process's collectors come with it.
package metricserver

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

// Handler answers a scrape with what cs collect, besides the Go runtime's
// (go_*) and the process's (process_*) metrics. A metric that cannot be
// read is logged and left out; the others are still served.
func Handler(log *slog.Logger, cs ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(cs...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// Serve serves h on addr until stop is called.
func Serve(addr string, h http.Handler) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(l)
	return func() { hs.Close() }, nil
}
