package daemon

import (
	"slices"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

// LIST_SERVICES has no pages: an admin on a host with more services than
// one reply holds (1149 in version 2, far below max_services' 4096) is not
// told of those with the highest ids. The offload agents, admins when
// root, take a service missing from the list for one santad dropped
// (santadconn.Survey.Gone: "service gone from santad"): they forget it
// and its forms while santad keeps it and its rules, and attaching its
// socket again is refused (EEXIST), so the rules stay unrefreshed (a DNS
// zone's changes never re-asked) for as long as the socket lives.
func TestListServicesListsAnAdminsEveryService(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.connectV2(t, admin)
	const others = 1149 // what one version-2 reply holds
	for range others {
		c.attach()
	}
	agents := c.attach() // the agent's socket, attached last
	got := c.ok(&protocol.ListServices{}).(*protocol.ListServicesReply)
	if !slices.ContainsFunc(got.Services, func(sv protocol.ServiceInfo) bool { return sv.ServiceID == agents }) {
		t.Errorf("LIST_SERVICES lists %d of %d services, not service %d, which santad has", len(got.Services), others+1, agents)
	}
}
