package datapath

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/model"
)

// Restoring after a restart. The daemon keeps its services and rules in its
// own journal; the data plane it left behind keeps answering meanwhile, and
// its santa_sock_release keeps deleting the services of closed sockets from
// its services map. That map therefore says which sockets are still open.

// restoring is a restore under way: the earlier process's services map,
// from Open (Options.KeepLinks) until EndRestore, and the services brought
// back. Its lock guards both; it registers and drops services through the
// store, whose lock it takes with its own held.
type restoring struct {
	store *store

	mu       sync.Mutex
	previous *ebpf.Map                  // the earlier process's services, until EndRestore
	restored map[model.ServiceID]uint64 // what RestoreService brought back: the socket cookie of each
}

// keepPrevious holds on to the earlier process's services map before its
// pin is replaced.
func (r *restoring) keepPrevious(dir string) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "services"), nil)
	if err != nil {
		return // nothing to restore from
	}
	r.previous = m
}

// RestoreService registers a service of an earlier process under its old
// id, if its socket is still open: after Open with KeepLinks, before
// WatchSockets, and EndRestore after that. Until WatchSockets replaces it,
// the earlier santa_sock_release marks a socket that closes in the earlier
// services map, where EndRestore looks; from then on the new program finds
// the restored service in the new map. A service restored after
// WatchSockets would be seen by neither if its socket closed in between,
// and would live on: that is refused. owner is AddService's.
func (d *Datapath) RestoreService(id model.ServiceID, info model.SocketInfo, owner *model.ConnOwner) error {
	d.watchMu.Lock()
	defer d.watchMu.Unlock()
	if d.watcher != nil {
		return fmt.Errorf("service %d: sockets are watched already; services are restored before WatchSockets", id)
	}
	return d.restore.service(id, info, owner)
}

func (r *restoring) service(id model.ServiceID, info model.SocketInfo, owner *model.ConnOwner) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.previouslyOpen(info.Cookie) {
		return fmt.Errorf("service %d: %w", id, model.ErrSocketClosed)
	}
	if err := r.store.addAs(id, info, owner); err != nil {
		return err
	}
	if r.restored == nil {
		r.restored = map[model.ServiceID]uint64{}
	}
	r.restored[id] = info.Cookie
	return nil
}

// previouslyOpen says whether the earlier process's services map still
// holds cookie's socket. Called with r.mu held.
func (r *restoring) previouslyOpen(cookie uint64) bool {
	if r.previous == nil {
		return false
	}
	// Read as bytes of the earlier map's own value size: an earlier
	// version's santa_service may be shorter than this one's.
	v := make([]byte, r.previous.ValueSize())
	return r.previous.Lookup(cookie, &v) == nil
}

// EndRestore finishes restoring, after WatchSockets: a socket closed after
// RestoreService checked it, but before WatchSockets' program took over, is
// only in the earlier map's deletions, so the restored services are checked
// once more. It returns the services dropped that way.
func (d *Datapath) EndRestore() []model.ServiceID { return d.restore.end() }

func (r *restoring) end() []model.ServiceID {
	r.mu.Lock()
	defer r.mu.Unlock()
	dropped := r.store.removeClosed(r.restored, r.previouslyOpen)
	r.restored = nil
	if r.previous != nil {
		r.previous.Close()
		r.previous = nil
	}
	return dropped
}

// addAs registers info's socket under id, a service of an earlier
// process.
func (st *store) addAs(id model.ServiceID, info model.SocketInfo, owner *model.ConnOwner) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.svcIDs.claim(uint32(id)); err != nil {
		return fmt.Errorf("service id %d: %w", id, err)
	}
	_, err := st.register(id, info, -1, owner)
	return err
}

// removeClosed removes those of the services restored (id: socket cookie)
// that are still registered for the same socket but whose socket open says
// is closed, and returns them. An id given to another socket since (the
// restored one's closed, and the id was reused) is not that service.
func (st *store) removeClosed(restored map[model.ServiceID]uint64, open func(cookie uint64) bool) []model.ServiceID {
	st.mu.Lock()
	defer st.mu.Unlock()
	var removed []model.ServiceID
	for id, cookie := range restored {
		svc, ok := st.services[id]
		if ok && svc.info.Cookie == cookie && !open(cookie) {
			st.objs.Services.Delete(svc.info.Cookie)
			st.drop(svc)
			removed = append(removed, id)
		}
	}
	slices.Sort(removed)
	return removed
}
