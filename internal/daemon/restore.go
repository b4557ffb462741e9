package daemon

import (
	"errors"
	"slices"

	"github.com/santa-offload/santa/internal/daemon/journal"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// Restorer brings back an earlier santad's services: a *datapath.Datapath
// opened with KeepLinks, before WatchSockets (run.go says why).
type Restorer interface {
	RestoreService(model.ServiceID, model.SocketInfo, *model.ConnOwner) error
	Apply(model.ServiceID, model.Batch) ([]model.RuleID, error)
	RemoveService(model.ServiceID) error
}

// Restore registers the journal's services whose sockets are still open,
// with their rules under their old ids. A socket that closes meanwhile is
// told by EndRestore, after WatchSockets. It returns how many services and
// rules came back.
func (s *Server) Restore(r Restorer, saved map[model.ServiceID]*journal.Service) (services, rules int) {
	ids := make([]model.ServiceID, 0, len(saved))
	for id := range saved {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if s.restoreOne(r, saved[id]) {
			services++
			rules += len(saved[id].Rules)
		}
	}
	return services, rules
}

func (s *Server) restoreOne(r Restorer, js *journal.Service) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.log.With("service", js.ID, "addr", js.Info.Local, "owner_uid", js.UID, "rules", len(js.Rules))
	// Whether an admin attached it is not journaled: restored, a service
	// is an admin's if its uid is 0 or its gid admin_group's.
	admin := js.UID == 0 || (s.adminGroup.Load() != noAdminGroup && int64(js.GID) == s.adminGroup.Load())
	err := r.RestoreService(js.ID, js.Info, s.connOwner(js.Info, js.UID, admin))
	if errors.Is(err, model.ErrSocketClosed) {
		log.Info("not restoring a service whose socket closed")
		return false
	}
	if err != nil {
		log.Error("restoring a service", "err", err)
		s.counters.failed(errRestore)
		return false
	}
	if len(js.Rules) > 0 {
		b := js.Batch() // the journal keeps rules: compiled here, once
		err := b.Compile(rule.LimitsFor(js.Info.Protocol))
		if err == nil {
			_, err = r.Apply(js.ID, b)
		}
		if err != nil {
			log.Error("restoring a service's rules; dropping the service", "err", err)
			s.counters.failed(errRestore)
			if err := r.RemoveService(js.ID); err != nil {
				// Registered in the data plane, in neither state nor
				// journal: its socket's requests pass (no rules) until
				// the socket closes.
				log.Error("dropping a service whose rules could not be restored", "err", err)
			}
			return false
		}
	}
	s.st.add(js).admin = admin
	return true
}
