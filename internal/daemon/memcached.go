package daemon

import (
	"syscall"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// PARSER, GENERATION and MEMCACHED_STATS (docs/protocol.md): a memcached
// service's invalidation, which guarded rules rely on (guards.go). None is
// journaled: after a restart of santad its guarded rules are gone, and an
// agent marks the services again.

// parser sets how the data plane reads a service's requests. A memcached
// service starts a generation domain (Domain is itself) or joins one
// another service of the client's started: its writes invalidate the
// rules of both.
func (s *Server) parser(sess *session, req *protocol.Parser) protocol.Body {
	p := model.Parser{Kind: model.ParserKind(req.Kind), Domain: model.ServiceID(req.Domain)}
	switch p.Kind {
	case model.ParserNone:
		if p.Domain != 0 {
			return protocol.Errorf(syscall.EINVAL, "domain is %d; a service without a parser has none (0)", p.Domain)
		}
	case model.ParserMemcached:
	default:
		return protocol.Errorf(syscall.EINVAL, "parser kind %d: santad knows 0 (none) and 1 (memcached)", req.Kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, perr := s.owned(sess, req.ServiceID)
	if perr != nil {
		return perr
	}
	if p.Kind == model.ParserMemcached && p.Domain != sv.ID {
		if perr := s.joinable(sess, sv, p.Domain); perr != nil {
			return perr
		}
	}
	if err := s.dp.SetParser(sv.ID, p); err != nil {
		return dataplaneError(err)
	}
	sv.parser = p
	s.log.Info("service parser", "service", sv.ID, "kind", req.Kind, "domain", p.Domain, "client", sess.client)
	return &protocol.ParserReply{}
}

// joinable refuses a domain service sv may not join: one that is not
// there, another uid's (unless the client is an admin), or one that did
// not start a domain. Called with s.mu held.
func (s *Server) joinable(sess *session, sv *service, domain model.ServiceID) *protocol.Error {
	d := s.st.services[domain]
	switch {
	case d == nil:
		return protocol.Errorf(syscall.ENOENT, "no service %d, whose domain service %d would join", domain, sv.ID)
	case !sess.peer.Admin && d.UID != sess.peer.UID:
		return protocol.Errorf(syscall.EPERM, "domain %d is a service of uid %d, not of uid %d: a domain's services have one owner",
			domain, d.UID, sess.peer.UID)
	case d.parser != model.Parser{Kind: model.ParserMemcached, Domain: domain}:
		return protocol.Errorf(syscall.EINVAL, "service %d has not started a domain for service %d to join: PARSER it memcached with domain %d first",
			domain, sv.ID, domain)
	}
	return nil
}

// memcachedOf is the client's memcached service id and its domain, for a
// request that reads the domain.
func (s *Server) memcachedOf(sess *session, id uint32) (model.ServiceID, model.ServiceID, *protocol.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, perr := s.owned(sess, id)
	switch {
	case perr != nil:
		return 0, 0, perr
	case sv.parser.Kind != model.ParserMemcached:
		return 0, 0, protocol.Errorf(syscall.EINVAL, "service %d is not a memcached service: PARSER marks it one", id)
	}
	return sv.ID, sv.parser.Domain, nil
}

// generation reads what a guard of a key is built at: the client reads it
// before it asks memcached for the key's value.
func (s *Server) generation(sess *session, req *protocol.Generation) protocol.Body {
	if err := model.CheckMemcachedKey(req.Key); err != nil {
		return protocol.Errorf(syscall.EINVAL, "key: %v", err)
	}
	id, _, perr := s.memcachedOf(sess, req.ServiceID)
	if perr != nil {
		return perr
	}
	g, err := s.dp.Generation(id, req.Key)
	if err != nil {
		return dataplaneError(err)
	}
	return &protocol.GenerationReply{Gen: g.Gen, DomainGen: g.DomainGen, Epoch: g.Epoch, InFlight: g.InFlight, Fresh: g.Fresh}
}

// memcachedStats reads the counters of a memcached service's domain.
func (s *Server) memcachedStats(sess *session, req *protocol.MemcachedStats) protocol.Body {
	id, domain, perr := s.memcachedOf(sess, req.ServiceID)
	if perr != nil {
		return perr
	}
	st, err := s.dp.MemcachedStats(id)
	if err != nil {
		return dataplaneError(err)
	}
	return &protocol.MemcachedStatsReply{Domain: uint32(domain), Writes: st.Writes, KeyBumps: st.KeyBumps,
		DomainBumps: st.DomainBumps, Completed: st.Completed, Released: st.Released, Overflow: st.Overflow, Lost: st.Lost,
		GuardStale: st.GuardStale, GuardInFlight: st.GuardInFlight, GuardExpired: st.GuardExpired,
		UDPHeld: st.UDPHeld, UDPTimedOut: st.UDPTimedOut, UDPDomain: st.UDPDomain, DelayedFlush: st.DelayedFlush,
		Refreshed: st.Refreshed, FreshTorn: st.FreshTorn, Filled: st.Filled}
}
