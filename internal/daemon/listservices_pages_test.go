package daemon

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

// listAll reads every page of c's LIST_SERVICES (version 7), max a page
// (0: as many as fit), and the pages' sizes.
func (c *conn) listAll(max uint32) (ids []uint32, pages []int) {
	c.t.Helper()
	for start := uint32(0); ; {
		r := c.ok(&protocol.ListServices{Start: start, Max: max}).(*protocol.ListServicesReply)
		pages = append(pages, len(r.Services))
		for _, sv := range r.Services {
			if sv.ServiceID < start {
				c.t.Fatalf("the page from %d lists service %d", start, sv.ServiceID)
			}
			ids = append(ids, sv.ServiceID)
		}
		if r.Next == protocol.LastPage {
			return ids, pages
		}
		if r.Next <= start || len(r.Services) == 0 || r.Next <= r.Services[len(r.Services)-1].ServiceID {
			c.t.Fatalf("the page from %d of %d services says the next starts at %d", start, len(r.Services), r.Next)
		}
		start = r.Next
	}
}

// LIST_SERVICES had no pages: an admin on a host with more services than
// one reply holds (1149 in version 2, far below max_services' 4096) was
// not told of those with the highest ids. The offload agents, admins when
// root, take a service missing from the list for one santad dropped
// (santadconn.Survey.Gone: "service gone from santad"): they forgot it and
// its forms while santad kept it and its rules, and attaching its socket
// again was refused (EEXIST), so the rules stayed unrefreshed (a DNS zone's
// changes never re-asked) for as long as the socket lived.
//
// Version 7 lists them in pages; a version without pages is refused the
// list (EPROTONOSUPPORT) rather than told a part of it as the whole.
func TestListServicesListsAnAdminsEveryService(t *testing.T) {
	s := newTestServer(t, nil)
	// An agent of the longest name: its services take the most room.
	c := s.connect(t, admin, false)
	c.ok(&protocol.Hello{MinVersion: protocol.Version2, MaxVersion: protocol.Version2, Client: strings.Repeat("a", protocol.MaxClientName)})
	const others = 1149 // what one version-2 reply holds of them
	var want []uint32
	for range others {
		want = append(want, c.attach())
	}
	agents := c.attach() // the agent's socket, attached last
	want = append(want, agents)

	got, pages := s.connect(t, admin, true).listAll(0)
	if !slices.Equal(got, want) {
		t.Errorf("LIST_SERVICES' pages list %d of %d services (service %d listed: %v)", len(got), len(want),
			agents, slices.Contains(got, agents))
	}
	if len(pages) < 2 {
		t.Errorf("%d services came in %d pages, want 2", len(want), len(pages))
	}

	c.refused(&protocol.ListServices{}, syscall.EPROTONOSUPPORT, "list them over version 7")
	c.ok(&protocol.Status{}) // a refusal: the connection stays

	s.connectV1(t, admin).ok(&protocol.ListServices{}) // 1150 fit version 1's 2730
}

// A page holds the client's services of id start and above, at most max;
// a client without pages gets the whole list, as before version 7.
func TestListServicesPages(t *testing.T) {
	s := newTestServer(t, nil)
	a, b := s.connect(t, alice, true), s.connect(t, bob, true)
	var mine, all []uint32
	for i := range 7 {
		c := b
		if i%3 != 1 {
			c = a
		}
		id := c.attach()
		all = append(all, id)
		if c == a {
			mine = append(mine, id)
		}
	}
	for _, max := range []uint32{0, 1, 2, 100} {
		got, pages := a.listAll(max)
		if !slices.Equal(got, mine) {
			t.Errorf("alice's pages of at most %d list %v, want %v", max, got, mine)
		}
		if max == 1 && len(pages) != len(mine) {
			t.Errorf("alice's pages of 1: %v", pages)
		}
		if got, _ := s.connect(t, admin, true).listAll(max); !slices.Equal(got, all) {
			t.Errorf("the admin's pages of at most %d list %v, want %v", max, got, all)
		}
	}
	r := a.ok(&protocol.ListServices{Start: all[len(all)-1] + 1}).(*protocol.ListServicesReply)
	if len(r.Services) != 0 || r.Next != protocol.LastPage {
		t.Errorf("the page past the last service is %+v; want empty and the last", r)
	}
	r = a.ok(&protocol.ListServices{Start: mine[1], Max: 1}).(*protocol.ListServicesReply)
	if len(r.Services) != 1 || r.Services[0].ServiceID != mine[1] || r.Next != all[slices.Index(all, mine[1])+1] {
		t.Errorf("alice's page of 1 from %d is %+v, next %d", mine[1], r.Services, r.Next)
	}

	for _, c := range []*conn{s.connectV1(t, alice), s.connectV2(t, alice), s.connect(t, alice, false)} {
		if c.version == 0 {
			c.ok(&protocol.Hello{MinVersion: 1, MaxVersion: protocol.Version6, Client: "v6"})
		}
		r := c.ok(&protocol.ListServices{}).(*protocol.ListServicesReply)
		var got []uint32
		for _, sv := range r.Services {
			got = append(got, sv.ServiceID)
		}
		if !slices.Equal(got, mine) || r.Next != 0 {
			t.Errorf("version %d lists %v, next %d; want %v, no next", c.version, got, r.Next, mine)
		}
	}
}
