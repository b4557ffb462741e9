package daemon

import (
	"reflect"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

// PATH_STATS gives every client, not only admins, the host's path
// counters, by name.
func TestPathStats(t *testing.T) {
	s := newTestServer(t, nil)
	got := s.connect(t, alice, true).ok(&protocol.PathStats{}).(*protocol.PathStatsReply)
	want := &protocol.PathStatsReply{Paths: []protocol.PathCount{{Name: "answered", Count: 3}, {Name: "passed", Count: 0}, {Name: "tcp_fin", Count: 2}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PATH_STATS: %+v; want %+v", got, want)
	}
}
