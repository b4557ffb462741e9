package santadconn

import (
	"errors"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/offload/server"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/protocol/protocoltest"
)

// scanner finds the agent's one socket, known and still bound.
type scanner struct{ inode uint64 }

func (s scanner) Scan(known map[uint64]bool) (map[uint64]bool, []server.Socket, error) {
	return map[uint64]bool{s.inode: known[s.inode]}, nil, nil
}

// santad serves LIST_SERVICES of services 0 to n-1, in pages of 2 to a
// client of version 7; to an older one, in one reply while n fits in
// fit, else refused as santad refuses a list that does not fit one reply.
func santad(t *testing.T, newest uint16, n, fit uint32) string {
	var version uint16
	return protocoltest.Serve(t, nil, func(req protocol.Body, _ []int) protocol.Body {
		switch req := req.(type) {
		case *protocol.Hello:
			version = min(req.MaxVersion, newest)
			return &protocol.HelloReply{Version: version, Admin: true}
		case *protocol.ListServices:
			r := &protocol.ListServicesReply{Next: protocol.LastPage}
			if version < protocol.Version7 {
				if n > fit {
					return protocol.Errorf(syscall.EPROTONOSUPPORT, "%d services take more than one reply", n)
				}
				req.Max, r.Next = n, 0
			}
			for id := req.Start; id < n; id++ {
				if len(r.Services) == 2 && version >= protocol.Version7 {
					r.Next = id
					break
				}
				r.Services = append(r.Services, protocol.ServiceInfo{ServiceID: id, Cookie: 100 + uint64(id)})
			}
			return r
		}
		return protocol.Errorf(syscall.EINVAL, "unexpected %v", req.Type())
	})
}

// An agent's service past santad's first page of services is not gone: it
// keeps it, its forms and its rules. (Before santad listed services in
// pages, the agent took a service past its one reply for one santad had
// dropped, and forgot it.)
func TestSurveyReadsEveryPage(t *testing.T) {
	const inode, agents = 77, 4 // services 0 to 4: the agent's on the third page
	sd, err := Dial(santad(t, protocol.MaxVersion, agents+1, 0), "agent")
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	s, err := TakeSurvey(sd, scanner{inode}, map[uint64]int{inode: agents})
	if err != nil {
		t.Fatal(err)
	}
	if why := s.Gone(inode, agents); why != "" {
		t.Errorf("the agent's service %d, on santad's third page, is gone: %s", agents, why)
	}
	if s.ByCookie[100+agents].ServiceID != agents || len(s.ByCookie) != agents+1 {
		t.Errorf("the survey knows the services %v", s.ByCookie)
	}
	if why := s.Gone(inode, agents+1); why == "" {
		t.Error("a service santad does not list is not gone")
	}
}

// A santad of a version without pages lists its services in one reply, or
// refuses them if they do not fit: the survey fails, and nothing is taken
// for gone.
func TestSurveyOfASantadWithoutPages(t *testing.T) {
	const inode = 77
	sd, err := Dial(santad(t, protocol.Version6, 5, 5), "agent")
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	s, err := TakeSurvey(sd, scanner{inode}, map[uint64]int{inode: 4})
	if err != nil || s.Gone(inode, 4) != "" {
		t.Errorf("a santad of version 6 with 5 services: %v, service 4 gone: %q", err, s.Gone(inode, 4))
	}
	sd, err = Dial(santad(t, protocol.Version6, 5, 4), "agent")
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	if _, err := TakeSurvey(sd, scanner{inode}, map[uint64]int{inode: 4}); !errors.Is(err, syscall.EPROTONOSUPPORT) || !Refused(err) {
		t.Errorf("a santad refusing its list: %v; want a refusal, EPROTONOSUPPORT", err)
	}
}
