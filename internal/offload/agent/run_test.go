package agent

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/santa-offload/santa/internal/offload/dnsmsg/dnstest"
)

// TestRun runs the agent as the command does, against a server found by
// its port alone (this process, through /proc and pidfd_getfd) and a fake
// santad: the hot form is offloaded, and the services are detached when
// the agent ends.
func TestRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: finding a socket by port reads every process's fds")
	}
	srv := NewReusePortServer(t, "127.0.0.1:0", 2)
	srv.SetZone(exampleZone(1, 1))
	d := newFakeDaemon()
	d.setHot(0, hot(10, "www.example.com"))
	cfg := DefaultConfig()
	// A random port, any user's to bind: this test's binds are trusted.
	cfg.Port, cfg.UniformAnswers, cfg.TrustedLocalBinds = srv.Addr().Port(), true, true
	cfg.Dial = func() (Santad, error) { return d.conn(), nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Run(ctx, cfg) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(d.rules(1)) == 0 || len(d.rules(2)) == 0 {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no rules after 10 s: %v", <-done)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.services) != 0 {
		t.Fatalf("services left after the agent ended: %v", d.services)
	}
}
