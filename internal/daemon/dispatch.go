package daemon

import (
	"syscall"

	"github.com/santa-offload/santa/internal/protocol"
)

// handle answers one decoded request. An error reply is a *protocol.Error.
func (s *Server) handle(sess *session, req protocol.Body, fds []int) protocol.Body {
	switch req := req.(type) {
	case *protocol.Hello:
		return s.hello(sess, req)
	case *protocol.Attach:
		return s.attach(sess, req, fds)
	case *protocol.Detach:
		return s.detach(sess, req)
	case *protocol.AddRules:
		return s.addRules(sess, req)
	case *protocol.ReplaceRules:
		return s.replaceRules(sess, req)
	case *protocol.DeleteRules:
		return s.deleteRules(sess, req)
	case *protocol.Begin:
		return s.begin(sess, req)
	case *protocol.Commit:
		return s.commit(sess, req)
	case *protocol.Abort:
		return s.abort(sess, req)
	case *protocol.ListServices:
		return s.listServices(sess, req)
	case *protocol.ListRules:
		return s.listRules(sess, req)
	case *protocol.RuleStats:
		return s.ruleStats(sess, req)
	case *protocol.ServiceStats:
		return s.serviceStats(sess, req)
	case *protocol.Status:
		return s.status()
	case *protocol.Learn:
		return s.learn(sess, req)
	case *protocol.Hot:
		return s.hot(sess, req)
	case *protocol.Parser:
		return s.parser(sess, req)
	case *protocol.Generation:
		return s.generation(sess, req)
	case *protocol.MemcachedStats:
		return s.memcachedStats(sess, req)
	case *protocol.PathStats:
		return s.pathStats()
	}
	return protocol.Errorf(syscall.EPROTO, "%v is not a request", req.Type())
}

// hello agrees on a version, the newest both sides speak, and tells the
// client who it is to santad. A later HELLO agrees anew: its reply and
// every message after it are in the version it agreed on.
func (s *Server) hello(sess *session, h *protocol.Hello) protocol.Body {
	v := min(h.MaxVersion, protocol.MaxVersion)
	if v < h.MinVersion || v < protocol.MinVersion {
		return protocol.Errorf(syscall.EPROTONOSUPPORT, "the client speaks versions %d to %d; santad speaks versions %d to %d",
			h.MinVersion, h.MaxVersion, protocol.MinVersion, protocol.MaxVersion)
	}
	if !sess.hello {
		s.log.Debug("client connected", "client", h.Client, "uid", sess.peer.UID, "pid", sess.peer.PID, "admin", sess.peer.Admin)
	}
	sess.hello, sess.version, sess.client = true, v, h.Client
	var q Quota // admins have none
	if !sess.peer.Admin {
		s.mu.Lock()
		q = s.quotas.of(sess.peer.UID)
		s.mu.Unlock()
	}
	return &protocol.HelloReply{Version: v, UID: sess.peer.UID, GID: sess.peer.GID,
		PID: uint32(sess.peer.PID), Admin: sess.peer.Admin, QuotaRules: q.Rules, QuotaBytes: q.Bytes, Daemon: s.version}
}
