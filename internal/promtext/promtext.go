// Package promtext writes Prometheus metrics in the text exposition format
// 0.0.4 and serves them over HTTP, by hand: santad and the offload agent
// have a handful of families each, which need no client library.
package promtext

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// ContentType is the format's HTTP content type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Serve serves GET /metrics on addr, written by write, until stop is
// called. A write error is logged.
func Serve(addr string, write func(io.Writer) error, log *slog.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		if err := write(w); err != nil {
			log.Warn("writing metrics", "err", err)
		}
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(l)
	return func() { hs.Close() }, nil
}

// Writer writes families and samples; Flush ends the output.
type Writer struct{ *bufio.Writer }

// NewWriter writes to out.
func NewWriter(out io.Writer) Writer { return Writer{bufio.NewWriter(out)} }

// Family writes a family's HELP and TYPE lines.
func (w Writer) Family(name, typ, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// Gauge writes a family of one unlabelled gauge.
func (w Writer) Gauge(name, help string, v uint64) {
	w.Family(name, "gauge", help)
	w.Sample(name, v)
}

// Sample writes one line; labels are name, value pairs.
func (w Writer) Sample(name string, v uint64, labels ...string) {
	w.WriteString(name)
	for i := 0; i+1 < len(labels); i += 2 {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		fmt.Fprintf(w, "%s%s=\"%s\"", sep, labels[i], labelEscaper.Replace(labels[i+1]))
	}
	if len(labels) > 0 {
		w.WriteByte('}')
	}
	fmt.Fprintf(w, " %d\n", v)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
