package daemon

import (
	"syscall"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// learn turns a service's learning on or off (docs/protocol.md, LEARN).
// The client becomes the service's manager. Learning is not journaled:
// after a restart of santad, a manager sends LEARN again.
func (s *Server) learn(sess *session, req *protocol.Learn) protocol.Body {
	if req.KeyOff > model.MaxLearnOffset {
		return protocol.Errorf(syscall.EINVAL, "key_off is %d; the limit is %d", req.KeyOff, model.MaxLearnOffset)
	}
	if req.Counts > model.MaxLearnCounts {
		return protocol.Errorf(syscall.EINVAL, "counts is %d; the limit is %d (0: the limit)", req.Counts, model.MaxLearnCounts)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, perr := s.owned(sess, req.ServiceID)
	if perr != nil {
		return perr
	}
	l := model.Learning{KeyOffset: req.KeyOff, ProbePort: req.ProbePort, Enabled: req.Enable, Counts: req.Counts}
	if err := s.dp.SetLearning(sv.ID, l); err != nil {
		return dataplaneError(err)
	}
	sv.manager = sess.client
	s.log.Info("service learning", "service", sv.ID, "enabled", l.Enabled, "key_off", l.KeyOffset,
		"probe_port", l.ProbePort, "counts", l.Counts, "client", sess.client)
	return &protocol.LearnReply{}
}

// hot answers a learning service's most passed requests of the last
// window from the one at index from on, as many as fit one reply, or max
// if fewer. Who may read them is who may read the service's rule counters:
// they tell other clients' requests.
func (s *Server) hot(sess *session, req *protocol.Hot) protocol.Body {
	s.mu.Lock()
	sv, perr := s.owned(sess, req.ServiceID)
	s.mu.Unlock()
	if perr != nil {
		return perr
	}
	room := protocol.MaxMessage - protocol.HotOverhead(sess.version)
	max := room / protocol.HotRequestSize(&protocol.HotRequest{}) // as many as could fit
	if req.Max != 0 {
		max = min(max, int(req.Max))
	}
	set, err := s.dp.Hot(sv.ID, int(req.From), max)
	if err != nil {
		return dataplaneError(err)
	}
	r := &protocol.HotReply{WindowMS: uint32(set.Window.Milliseconds()), Window: set.Number, Total: uint32(set.Total),
		CountedPPM: set.CountedPPM}
	for _, h := range set.Requests {
		item := protocol.HotRequest{Passes: h.Passes, Key: h.Key}
		if room -= protocol.HotRequestSize(&item); room < 0 {
			break
		}
		r.Requests = append(r.Requests, item)
	}
	return r
}
