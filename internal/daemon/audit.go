package daemon

import (
	"github.com/santa-offload/santa/internal/model"
)

// logChange writes the audit line of one change of a service's rules that
// the data plane took: one line per request (a batch, or a transaction's
// COMMIT), not per rule, naming who made it as the kernel and HELLO told
// santad (pid and uid from SO_PEERCRED at connect time, the client's
// name, which the client chooses), the service and how many rules the
// change added, replaced and deleted. t is the transaction committed, or
// nil for a batch applied at once (txn 0).
func (s *Server) logChange(sess *session, sv *service, b model.Batch, t *txn) {
	var txn uint32
	if t != nil {
		txn = t.id
	}
	s.log.Info("rules changed", "client", sess.client, "pid", sess.peer.PID, "uid", sess.peer.UID,
		"service", sv.ID, "protocol", protocolName(sv.Info.Protocol), "addr", sv.Info.Local, "owner_uid", sv.UID,
		"added", len(b.Add), "replaced", len(b.Replace), "deleted", len(b.Delete), "txn", txn, "rules", len(sv.Rules))
}
