package daemon

import (
	"syscall"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// maxTxns is how many transactions one connection may hold open.
const maxTxns = 4

// txn is an open transaction: batches checked but not applied, with their
// rules compiled as they were staged, so that COMMIT compiles nothing. It holds
// its service itself, not the id: ids are reused at once when a socket
// closes, and a transaction must never land on the next socket. Its added
// rules have their ids from the start (batch.AddIDs, reserved in the data
// plane), so that COMMIT's reply need not carry them: a million ids would
// not fit in one message.
type txn struct {
	id      uint32 // the client's id of it, on its connection
	svc     *service
	batch   model.Batch
	guards  requestGuards         // of batch's rules
	use     usage                 // what batch changes in the owner's quota, as staged
	hold    usage                 // what its staged rules hold of the owner's quota (Server.held)
	touched map[model.RuleID]bool // replaced or deleted
}

// end drops the transaction, giving back the ids of rules that did not
// land and what its staged rules held of the owner's quota. Every way a
// transaction ends comes here: COMMIT, applied or refused, ABORT, and its
// connection closing (endAll), santad's shutdown included. Called with
// s.mu held.
func (s *Server) end(sess *session, id uint32) {
	t := sess.txns[id]
	if t == nil {
		return
	}
	delete(sess.txns, id)
	s.dp.ReleaseRuleIDs(t.batch.AddIDs)
	if s.held[t.svc.UID] = s.held[t.svc.UID].minus(t.hold); s.held[t.svc.UID] == (usage{}) {
		delete(s.held, t.svc.UID)
	}
}

// heldBesides is what the open transactions but t (nil: all) hold of
// uid's quota. Called with s.mu held.
func (s *Server) heldBesides(uid uint32, t *txn) usage {
	if t == nil {
		return s.held[uid]
	}
	return s.held[uid].minus(t.hold)
}

// endAll drops a closing connection's transactions.
func (s *Server) endAll(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range sess.txns {
		s.end(sess, id)
	}
}

func (t *txn) items() int { return len(t.batch.Add) + len(t.batch.Replace) + len(t.batch.Delete) }

func (s *Server) begin(sess *session, req *protocol.Begin) protocol.Body {
	if len(sess.txns) >= maxTxns {
		return protocol.Errorf(syscall.ENOSPC, "this connection has %d open transactions; the limit is %d", len(sess.txns), maxTxns)
	}
	s.mu.Lock()
	sv, perr := s.owned(sess, req.ServiceID)
	s.mu.Unlock()
	if perr != nil {
		return perr
	}
	for sess.lastTxn++; sess.lastTxn == 0 || sess.txns[sess.lastTxn] != nil; sess.lastTxn++ {
	}
	sess.txns[sess.lastTxn] = &txn{id: sess.lastTxn, svc: sv, touched: map[model.RuleID]bool{}}
	return &protocol.BeginReply{Txn: sess.lastTxn}
}

// open is the client's transaction id on service svc, still alive.
// Called with s.mu held.
func (s *Server) open(sess *session, id, svc uint32) (*txn, *protocol.Error) {
	t := sess.txns[id]
	switch {
	case t == nil:
		return nil, protocol.Errorf(syscall.ENOENT, "no transaction %d on this connection", id)
	case svc != uint32(t.svc.ID):
		return nil, protocol.Errorf(syscall.EINVAL, "transaction %d is on service %d, not on service %d", id, t.svc.ID, svc)
	case s.st.services[t.svc.ID] != t.svc:
		return nil, protocol.Errorf(syscall.ENOENT, "service %d of transaction %d has ended", t.svc.ID, id)
	}
	return t, nil
}

// stage checks b at once against the service as it is now and adds it to
// the transaction; it returns the ids the added rules will have. A
// transaction holds at most the host's rule capacity, and, for a client
// that is not an admin, no more than the owner's quota allows with what is
// installed now and what the owner's other open transactions hold (admit),
// and what they all stage must fit the quota by itself (admitStaged). The
// rules it stages, to add or to replace others with, hold their share of
// the quota, rules and bytes, until it ends: santad holds them until then,
// and the added ones' reserved ids count against the host's capacity. So
// a uid holds at most its quota staged, whatever the rules its
// transactions replace or delete would free at COMMIT, and its every other
// change counts what they stage on top of what it has installed (COMMIT
// checks again).
func (s *Server) stage(sess *session, svc, id uint32, b model.Batch, g requestGuards, items []rule.Rule) ([]uint32, *protocol.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, perr := s.open(sess, id, svc)
	if perr != nil {
		return nil, perr
	}
	if perr := checkBatch(t.svc, &b, g, t.touched, t.batch, items); perr != nil {
		return nil, perr
	}
	if n := t.items() + len(b.Add) + len(b.Replace) + len(b.Delete); n > int(s.capacity) {
		return nil, protocol.Errorf(syscall.ENOSPC, "transaction %d would hold %d items; the host's rule capacity is %d", id, n, s.capacity)
	}
	sv := t.svc
	more := t.use.plus(change(sv, b)) // this one's held rules are in more
	hold := stagedUse(b)
	if !sess.peer.Admin {
		q := s.quotas.of(sv.UID)
		if perr := q.admit(sv.UID, s.st.usage[sv.UID], s.heldBesides(sv.UID, t), more, b.Add); perr != nil {
			return nil, perr
		}
		if perr := q.admitStaged(sv.UID, s.held[sv.UID], hold, items); perr != nil {
			return nil, perr
		}
	}
	ids, err := s.dp.ReserveRuleIDs(len(b.Add))
	if err != nil {
		return nil, dataplaneError(err)
	}
	s.held[sv.UID] = s.held[sv.UID].plus(hold)
	t.hold = t.hold.plus(hold)
	t.use = more
	t.guards.add = appendGuards(t.guards.add, len(t.batch.Add), g.add, len(b.Add))
	t.guards.replace = appendGuards(t.guards.replace, len(t.batch.Replace), g.replace, len(b.Replace))
	t.batch.AddIDs = append(t.batch.AddIDs, ids...)
	t.batch.Add = append(t.batch.Add, b.Add...)
	t.batch.AddCompiled = append(t.batch.AddCompiled, b.AddCompiled...)
	t.batch.Replace = append(t.batch.Replace, b.Replace...)
	t.batch.ReplaceCompiled = append(t.batch.ReplaceCompiled, b.ReplaceCompiled...)
	t.batch.Delete = append(t.batch.Delete, b.Delete...)
	for _, u := range b.Replace {
		t.touched[u.ID] = true
	}
	for _, id := range b.Delete {
		t.touched[id] = true
	}
	return wireIDs(ids), nil
}

// commit applies a transaction as one batch. Applied or refused, it ends.
func (s *Server) commit(sess *session, req *protocol.Commit) protocol.Body {
	t := sess.txns[req.Txn]
	if t == nil {
		return protocol.Errorf(syscall.ENOENT, "no transaction %d on this connection", req.Txn)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.end(sess, req.Txn)
	if s.st.services[t.svc.ID] != t.svc {
		return protocol.Errorf(syscall.ENOENT, "service %d of transaction %d has ended", t.svc.ID, req.Txn)
	}
	// Rules replaced or deleted may have gone since they were staged.
	if perr := checkIDs(t.svc, t.batch, nil); perr != nil {
		return protocol.Errorf(perr.Code, "transaction %d: %s", req.Txn, perr.Message)
	}
	ids, perr := s.apply(sess, t.svc, t.batch, t.guards, t, nil, nil)
	if perr != nil {
		return perr
	}
	return &protocol.CommitReply{Added: uint32(len(ids))}
}

func (s *Server) abort(sess *session, req *protocol.Abort) protocol.Body {
	if sess.txns[req.Txn] == nil {
		return protocol.Errorf(syscall.ENOENT, "no transaction %d on this connection", req.Txn)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.end(sess, req.Txn)
	return &protocol.AbortReply{}
}
