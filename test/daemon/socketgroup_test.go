package daemon

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A user outside the socket's group is told which group to join; a member
// is served.
func TestSocketGroupHint(t *testing.T) {
	const group = "4243"
	e := newEnv(t, "g", "", "-socket-group", group)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := e.helper(ctx, nil, "ops").CombinedOutput()
	want := "connect: permission denied; the socket is open to group " + group +
		" (mode 0660): join it (sudo usermod -aG " + group + " $USER, then log in again) or use sudo\n"
	if err == nil || !strings.HasSuffix(string(out), want) {
		t.Errorf("a client outside group %s: %v, %q; want it to end %q", group, err, out, want)
	}
	if out, err := e.helperAs(ctx, who{uid: nobody.uid, groups: group}, nil, "ops").CombinedOutput(); err != nil {
		t.Errorf("a member of group %s: %v, %q", group, err, out)
	}
}
