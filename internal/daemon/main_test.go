package daemon

import (
	"os"
	"testing"
)

// TestMain runs this test binary as a client process instead when a test
// re-executes it so (peer_test.go).
func TestMain(m *testing.M) {
	if mode := os.Getenv(clientEnv); mode != "" {
		os.Exit(runClient(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}
