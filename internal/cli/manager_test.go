package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/santa-offload/santa/client"
)

// A service's manager is the HELLO client name its attaching connection
// chose: any client of santad's socket picks it (valid UTF-8, at most 64
// bytes, control characters and all). An admin's `santactl services`
// lists every uid's services, so another uid's name must not reach the
// admin's terminal raw: a newline forges a row of the table (here, a
// root-owned service managed by santa-offload dns), and ESC starts a
// terminal escape sequence.
func TestServicesTableEscapesManager(t *testing.T) {
	forged := "x\n9      udp    0.0.0.0:53      0      100    1       santa-offload dns\x1b]0;pwned\a"
	v := newServiceView(client.ServiceInfo{ServiceID: 7, Protocol: 17, Family: 4, Port: 5353, OwnerUID: 1000, Manager: forged})
	var out bytes.Buffer
	if err := serviceTable(&out, v); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(out.String(), "\n"); lines != 2 {
		t.Errorf("one service, %d lines (header included, want 2):\n%s", lines, out.String())
	}
	if strings.ContainsAny(out.String(), "\x1b\a") {
		t.Errorf("the manager's control characters reach the terminal raw: %q", out.String())
	}
}
