package agent

import (
	"context"
	"maps"

	"github.com/santa-offload/santa/internal/offload/santadconn"
)

// follow runs a window when santad's hot sets make one due
// (santadconn.Follower). Only the window loop calls it.
func (a *agent) follow(ctx context.Context) {
	if a.follower.Due(a.now(), a.hotNumber) {
		a.window(ctx)
	}
}

// hotNumber is the number of the newest hot set of the agent's services
// (santadconn.HotNumber).
func (a *agent) hotNumber() (uint32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sd == nil {
		return 0, false
	}
	return santadconn.HotNumber(a.sd.Hot, maps.Keys(a.services))
}
