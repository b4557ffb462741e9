package client

import (
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

// pagedServices serves LIST_SERVICES of the services ids, in pages of
// at most size, to a client of version 7; to an older one, all of them
// in one reply, or EPROTONOSUPPORT past fit. It records the requests.
func pagedServices(t *testing.T, newest uint16, ids []uint32, size, fit int) (*Client, func() []protocol.ListServices) {
	var mu sync.Mutex
	var asked []protocol.ListServices
	var version uint16
	path := serve(t, func(req protocol.Body, _ []int) protocol.Body {
		mu.Lock()
		defer mu.Unlock()
		switch req := req.(type) {
		case *protocol.Hello:
			version = min(req.MaxVersion, newest)
			return &protocol.HelloReply{Version: version}
		case *protocol.ListServices:
			asked = append(asked, *req)
			if version < protocol.Version7 {
				if len(ids) > fit {
					return protocol.Errorf(syscall.EPROTONOSUPPORT, "too many services")
				}
				r := &protocol.ListServicesReply{}
				for _, id := range ids {
					r.Services = append(r.Services, ServiceInfo{ServiceID: id})
				}
				return r
			}
			r := &protocol.ListServicesReply{Next: protocol.LastPage}
			for _, id := range ids {
				if id < req.Start {
					continue
				}
				if len(r.Services) == size {
					r.Next = id
					break
				}
				r.Services = append(r.Services, ServiceInfo{ServiceID: id})
			}
			return r
		}
		return protocol.Errorf(syscall.EINVAL, "unexpected %v", req.Type())
	})
	return dialTo(t, path), func() []protocol.ListServices {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
}

func serviceIDs(s []ServiceInfo) []uint32 {
	var ids []uint32
	for _, si := range s {
		ids = append(ids, si.ServiceID)
	}
	return ids
}

// Services reads every page of a daemon of version 7, each from where the
// last said the next starts.
func TestServicesPages(t *testing.T) {
	ids := []uint32{0, 1, 4, 5, 9, 30, 31}
	c, asked := pagedServices(t, protocol.MaxVersion, ids, 2, 0)
	got, err := c.Services()
	if err != nil || !slices.Equal(serviceIDs(got), ids) {
		t.Fatalf("Services gives %v, %v; want %v", serviceIDs(got), err, ids)
	}
	want := []protocol.ListServices{{Start: 0}, {Start: 4}, {Start: 9}, {Start: 31}}
	if !slices.Equal(asked(), want) {
		t.Errorf("asked %+v, want %+v", asked(), want)
	}

	// The iterator stops when its loop does, asking no further page.
	var seen []uint32
	for s, err := range c.AllServices() {
		if err != nil {
			t.Fatal(err)
		}
		if seen = append(seen, s.ServiceID); len(seen) == 3 {
			break
		}
	}
	if !slices.Equal(seen, ids[:3]) || len(asked()) != len(want)+2 {
		t.Errorf("a loop that stops at 3 saw %v and asked %d pages", seen, len(asked())-len(want))
	}

	none, _ := pagedServices(t, protocol.MaxVersion, nil, 2, 0)
	if got, err := none.Services(); err != nil || len(got) != 0 {
		t.Errorf("no services: %v, %v", got, err)
	}
}

// A daemon of version 6 or older has no pages: one request, as before,
// whose reply is the list; past one reply it refuses, and so does Services.
func TestServicesOfADaemonWithoutPages(t *testing.T) {
	ids := []uint32{2, 3, 7}
	c, asked := pagedServices(t, protocol.Version6, ids, 1, 3)
	got, err := c.Services()
	if err != nil || !slices.Equal(serviceIDs(got), ids) || !slices.Equal(asked(), []protocol.ListServices{{}}) {
		t.Errorf("Services gives %v, %v, asking %+v; want %v in one request", serviceIDs(got), err, asked(), ids)
	}
	c, _ = pagedServices(t, protocol.Version2, ids, 1, 2)
	if got, err := c.Services(); !errors.Is(err, syscall.EPROTONOSUPPORT) || got != nil {
		t.Errorf("Services past one reply gives %v, %v; want EPROTONOSUPPORT", got, err)
	}
}

// A page whose next does not move on ends the listing with an error
// rather than asking it again and again.
func TestServicesPageThatDoesNotMoveOn(t *testing.T) {
	path := serve(t, func(req protocol.Body, _ []int) protocol.Body {
		switch req.(type) {
		case *protocol.Hello:
			return &protocol.HelloReply{Version: protocol.MaxVersion}
		case *protocol.ListServices:
			return &protocol.ListServicesReply{Next: 0, Services: []ServiceInfo{{ServiceID: 0}}}
		}
		return protocol.Errorf(syscall.EINVAL, "unexpected %v", req.Type())
	})
	if got, err := dialTo(t, path).Services(); err == nil {
		t.Errorf("Services gives %v; want an error", serviceIDs(got))
	}
}
