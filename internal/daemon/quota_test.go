package daemon

import (
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/protocol"
)

// A uid that is not an admin attaches at most its quota of services; the
// count follows DETACH, sockets closing and a restore, and one uid at its
// quota leaves others theirs.
func TestServiceQuota(t *testing.T) {
	one := uint32(1)
	s := newTestServer(t, func(c *Config) {
		c.QuotaServices = 2
		c.Quotas = map[string]Quota{
			"1001": {Services: &one},
			"1000": {Rules: 100}, // services left out: quota_services
		}
	})
	a, b, root := s.connect(t, alice, true), s.connect(t, bob, true), s.connect(t, admin, true)
	first := a.attach()
	a.attach()
	over := func(c *conn, want string) {
		t.Helper()
		before := len(s.st.services)
		c.refused(&protocol.Attach{}, syscall.EDQUOT, want, fdOf(t, udp(t)))
		if len(s.st.services) != before {
			t.Errorf("a refused ATTACH registered a service")
		}
	}
	over(a, "quota of 2 services for uid 1000 exceeded: 2 attached")
	b.attach()
	over(b, "quota of 1 services for uid 1001 exceeded: 1 attached")
	for range 3 {
		root.attach() // admins have no quota
	}

	a.ok(&protocol.Detach{ServiceID: first})
	gone := a.attach()
	over(a, "2 attached")
	sv := s.st.services[datapath.ServiceID(gone)]
	s.dp.RemoveService(sv.ID)
	s.SocketClosed(sv.ID, sv.Info)
	a.attach()
	over(a, "2 attached")

	// A restarted santad counts the services it restores.
	j, rep, err := journal.Open(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	restarted := newTestServer(t, func(c *Config) { c.QuotaServices = 2 })
	for _, js := range rep.Services {
		restarted.dp.restorable[js.Info.Cookie] = true
	}
	if n, _ := restarted.Restore(restarted.dp, rep.Services); n != len(s.st.services) {
		t.Fatalf("restored %d services, want %d", n, len(s.st.services))
	}
	restarted.connect(t, alice, true).refused(&protocol.Attach{}, syscall.EDQUOT, "2 attached", fdOf(t, udp(t)))
}
