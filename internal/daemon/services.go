package daemon

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// attach makes the socket passed along a service of the client's uid.
//
// Holding the descriptor is the proof of ownership: only a process that
// opened the socket, or was handed it, can pass it, and such a process can
// read the socket's requests and answer them anyway. The socket's own uid
// is not checked, so that a server that binds a privileged port as root
// and then drops privileges can still offload. The socket must be in
// santad's network namespace: the data plane never sees another's packets.
func (s *Server) attach(sess *session, req *protocol.Attach, fds []int) protocol.Body {
	if len(fds) != 1 {
		return protocol.Errorf(syscall.EBADF, "ATTACH carries %d file descriptors; it takes exactly one", len(fds))
	}
	if req.Flags != 0 {
		return protocol.Errorf(syscall.EINVAL, "flags is %#x; it must be 0", req.Flags)
	}
	fd := fds[0]
	// santad keeps no client's socket: once the socket is registered, the
	// descriptor is closed, so that the application's close really closes it.
	defer func() {
		unix.Close(fd)
		fds[0] = -1
	}()
	if what := notSocket(fd); what != "" {
		return protocol.Errorf(syscall.ENOTSOCK, "the descriptor passed is not a socket: %s", what)
	}
	info, err := model.InspectSocket(fd)
	switch {
	case err != nil:
		return protocol.Errorf(syscall.EOPNOTSUPP, "%v", err)
	case info.Protocol != unix.IPPROTO_UDP && info.Protocol != unix.IPPROTO_TCP:
		return protocol.Errorf(syscall.EOPNOTSUPP, "socket protocol is %d; santad serves UDP (17) and TCP (6) listeners", info.Protocol)
	case info.Local.Port() == 0:
		return protocol.Errorf(syscall.EINVAL, "the socket is not bound to a port")
	case info.NetnsCookie != s.netns:
		return protocol.Errorf(syscall.EOPNOTSUPP, "the socket is in another network namespace (cookie %d) than santad's (%d)",
			info.NetnsCookie, s.netns)
	}

	reply := s.register(sess, fd, info)
	// Without the lock: finding a listener's earlier connections reads all
	// of /proc. A service detached meanwhile adopts nothing.
	if si, ok := reply.(*protocol.ServiceInfo); ok && info.Protocol == unix.IPPROTO_TCP {
		s.adopt(model.ServiceID(si.ServiceID), info, sess.peer)
	}
	return reply
}

// register makes the socket fd, inspected as info, a service of the
// client's, within its quota, and journals it.
func (s *Server) register(sess *session, fd int, info model.SocketInfo) protocol.Body {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sess.peer.Admin {
		if perr := s.quotas.of(sess.peer.UID).admitService(sess.peer.UID, s.st.owned[sess.peer.UID]); perr != nil {
			return perr
		}
	}
	id, err := s.dp.AddService(fd, info, s.connOwner(info, sess.peer.UID, sess.peer.Admin))
	if err != nil {
		return dataplaneError(err)
	}
	if old := s.st.services[id]; old != nil {
		// Its socket closed and the id was reused before the news came.
		s.forget(old, "socket closed")
	}
	sv := s.st.add(&journal.Service{ID: id, Info: info, UID: sess.peer.UID, GID: sess.peer.GID,
		Rules: map[model.RuleID]rule.Rule{}})
	sv.manager = sess.client
	sv.admin = sess.peer.Admin
	if err := s.record(func(j *journal.Journal) error { return j.Attach(&sv.Service) }); err != nil {
		return notSaved(err)
	}
	s.log.Info("service attached", "service", id, "protocol", protocolName(info.Protocol), "addr", info.Local, "owner_uid", sess.peer.UID,
		"client", sess.client, "pid", sess.peer.PID)
	return serviceInfo(sv)
}

// adopt puts the connections a TCP listener accepted before it was
// attached under its rules; those that are busy stay the application's.
// Connections are santad's own netns's, like the listener. A client that
// is not an admin gets only connections of its own uid: another uid's
// connection may share the listener's port (SO_REUSEADDR) without being
// one it accepted.
func (s *Server) adopt(id model.ServiceID, listener model.SocketInfo, peer Peer) {
	onlyUID := int64(peer.UID)
	if peer.Admin {
		onlyUID = model.AnyUID
	}
	got, err := AdoptConnections(s.dp, id, listener, "", onlyUID)
	if err != nil {
		s.log.Warn("adopting connections", "service", id, "err", err)
		s.counters.failed(errAdopt)
		return
	}
	for _, e := range got.Skipped {
		s.log.Info("connection left to the application", "service", id, "reason", e)
	}
	if got.Adopted > 0 || len(got.Skipped) > 0 {
		s.log.Info("connections adopted", "service", id, "adopted", got.Adopted, "skipped", len(got.Skipped))
	}
}

// detach removes a service and its rules.
func (s *Server) detach(sess *session, req *protocol.Detach) protocol.Body {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, perr := s.owned(sess, req.ServiceID)
	if perr != nil {
		return perr
	}
	if err := s.dp.RemoveService(sv.ID); err != nil {
		return dataplaneError(err)
	}
	s.st.remove(sv)
	if err := s.record(func(j *journal.Journal) error { return j.Remove(sv.ID) }); err != nil {
		return notSaved(err)
	}
	s.log.Info("service detached", "service", sv.ID, "rules", len(sv.Rules), "client", sess.client, "pid", sess.peer.PID, "uid", sess.peer.UID)
	return &protocol.DetachReply{}
}

// owned is the service id names, if the client may touch it. Called with
// s.mu held.
func (s *Server) owned(sess *session, id uint32) (*service, *protocol.Error) {
	sv := s.st.services[model.ServiceID(id)]
	switch {
	case sv == nil:
		return nil, protocol.Errorf(syscall.ENOENT, "no service %d", id)
	case !sess.peer.Admin && sv.UID != sess.peer.UID:
		return nil, protocol.Errorf(syscall.EPERM, "service %d belongs to uid %d, not to uid %d", id, sv.UID, sess.peer.UID)
	}
	return sv, nil
}

// listServices lists the client's services, or all for an admin, by id.
//
// From version 7 it answers one page, as listRules does: the services of
// id req.Start and above, as many as fit one reply (at most req.Max), and
// the id the next page starts at. Earlier versions have no pages: their
// reply is every service, or, if those do not fit one reply (1149 of the
// longest in version 2, 2730 in version 1), EPROTONOSUPPORT. Leaving the rest
// out would tell the client, an offload agent say, that santad has no such
// services: it would forget its own.
func (s *Server) listServices(sess *session, req *protocol.ListServices) protocol.Body {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &protocol.ListServicesReply{}
	room, listed := protocol.MaxMessage-protocol.ListServicesOverhead(sess.version), 0
	for sv := range s.st.byID {
		if uint32(sv.ID) < req.Start || !sess.peer.Admin && sv.UID != sess.peer.UID {
			continue
		}
		listed++
		si := serviceInfo(sv)
		if n := protocol.ServiceInfoSize(sess.version, si); n <= room && (req.Max == 0 || len(r.Services) < int(req.Max)) {
			room -= n
			r.Services = append(r.Services, *si)
			continue
		}
		if sess.version < protocol.Version7 {
			continue // counted, for the error
		}
		r.Next = uint32(sv.ID)
		return r
	}
	if listed > len(r.Services) {
		return protocol.Errorf(syscall.EPROTONOSUPPORT, "the %d services listed take more than one reply of protocol version %d, "+
			"which has no pages: list them over version %d", listed, sess.version, protocol.Version7)
	}
	if sess.version >= protocol.Version7 {
		r.Next = protocol.LastPage
	}
	return r
}

func serviceInfo(sv *service) *protocol.ServiceInfo {
	a := sv.Info.Local.Addr()
	si := &protocol.ServiceInfo{ServiceID: uint32(sv.ID), Protocol: uint8(sv.Info.Protocol), Family: 6,
		Port: sv.Info.Local.Port(), Cookie: sv.Info.Cookie, NetnsCookie: sv.Info.NetnsCookie,
		OwnerUID: sv.UID, Rules: uint32(len(sv.Rules)), Manager: sv.manager}
	if a.Is4() {
		si.Family = 4
		v4 := a.As4()
		copy(si.Addr[:], v4[:])
	} else {
		si.Addr = a.As16()
	}
	return si
}
