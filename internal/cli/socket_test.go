package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santa-offload/santa/client"
)

// Without -socket, santactl connects to $SANTA_SOCKET; -socket overrides
// it. A socket nobody serves is said so, with the variable named.
func TestSocketEnv(t *testing.T) {
	_, path := withService(t)
	missing := filepath.Join(t.TempDir(), "santa.sock")
	for _, tc := range []struct {
		env    string
		args   []string
		stderr string
	}{
		{path, []string{"services"}, ""},
		{missing, []string{"-socket", path, "services"}, ""},
		{missing, []string{"services"}, "santactl: services: dial santad: dial unixpacket " + missing +
			": connect: no such file or directory; is santad running, with its socket there? ($SANTA_SOCKET names another socket)\n"},
	} {
		t.Setenv(client.SocketEnv, tc.env)
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), tc.args, &stdout, &stderr)
		if stderr.String() != tc.stderr || (err == nil) != (tc.stderr == "") {
			t.Errorf("SANTA_SOCKET=%s santactl %q: %v, stderr %q; want %q", tc.env, tc.args, err, stderr.String(), tc.stderr)
		}
		if tc.stderr == "" && !strings.Contains(stdout.String(), "127.0.0.1:7777") {
			t.Errorf("SANTA_SOCKET=%s santactl %q lists\n%s", tc.env, tc.args, stdout.String())
		}
	}
}
