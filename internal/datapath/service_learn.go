package datapath

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// SetLearning turns a UDP service's learning on or off, or changes its
// key offset, probe port or counts (learn.go). Turning it on, or changing
// the key offset, starts a new count: the hot set of the window before is
// gone.
func (d *Datapath) SetLearning(id model.ServiceID, l model.Learning) error {
	return d.store.setLearning(id, l)
}

// Hot is the last complete window's most passed requests of a learning
// service, most first: at most n, from the one at index from on. The keys
// are the learner's own bytes: read them, never write them.
func (d *Datapath) Hot(id model.ServiceID, from, n int) (model.HotSet, error) {
	if _, err := d.store.service(id); err != nil {
		return model.HotSet{}, err
	}
	return d.store.learn.hot(id, from, n)
}

func (st *store) setLearning(id model.ServiceID, l model.Learning) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	svc, ok := st.services[id]
	switch {
	case !ok:
		return fmt.Errorf("service %d: %w", id, model.ErrUnknownService)
	case svc.info.Protocol != unix.IPPROTO_UDP:
		return fmt.Errorf("service %d is not UDP: only UDP requests are learned: %w", id, model.ErrNotSupported)
	case l.KeyOffset > model.MaxLearnOffset:
		return fmt.Errorf("key offset %d: the limit is %d", l.KeyOffset, model.MaxLearnOffset)
	}
	was, wasID := svc.learning, svc.learnID
	newID := wasID
	if !l.Enabled {
		newID = 0
	} else if wasID == 0 || was.KeyOffset != l.KeyOffset {
		newID = st.learn.start(id, l.Counts)
	}
	svc.learning, svc.learnID = l, newID
	if err := st.objs.Services.Put(svc.info.Cookie, svc.value()); err != nil {
		svc.learning, svc.learnID = was, wasID
		if newID != wasID && newID != 0 {
			st.learn.end(newID)
		}
		return fmt.Errorf("service %d: setting learning: %w", id, err)
	}
	if wasID != 0 && wasID != newID {
		st.learn.end(wasID)
	}
	if newID != 0 && newID == wasID {
		st.learn.setCounts(newID, l.Counts)
	}
	return nil
}

// htons is v in network order, as the data plane (little-endian) reads a
// __be16 it loads.
func htons(v uint16) uint16 { return v<<8 | v>>8 }
