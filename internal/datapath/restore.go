package datapath

import (
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/model"
)

// Restoring after a restart. The daemon keeps its services and rules in its
// own journal; the data plane it left behind keeps answering meanwhile, and
// its santa_sock_release keeps deleting the services of closed sockets from
// its services map. That map therefore says which sockets are still open.

// keepPrevious holds on to the earlier process's services map before its
// pin is replaced.
func (d *Datapath) keepPrevious(dir string) error {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "services"), nil)
	if err != nil {
		return nil // nothing to restore from
	}
	d.previous = m
	return nil
}

// RestoreService registers a service of an earlier process under its old
// id, if its socket is still open. Between WatchSockets and EndRestore.
func (d *Datapath) RestoreService(id model.ServiceID, info model.SocketInfo) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.previouslyOpen(info.Cookie) {
		return fmt.Errorf("service %d: %w", id, model.ErrSocketClosed)
	}
	if err := d.svcIDs.claim(uint32(id)); err != nil {
		return fmt.Errorf("service id %d: %w", id, err)
	}
	if _, err := d.register(id, info); err != nil {
		return err
	}
	d.restored = append(d.restored, id)
	return nil
}

func (d *Datapath) previouslyOpen(cookie uint64) bool {
	if d.previous == nil {
		return false
	}
	var v santaSantaService
	return d.previous.Lookup(cookie, &v) == nil
}

// EndRestore finishes restoring: a socket closed after RestoreService
// checked it, but before WatchSockets' program saw its service, is only in
// the earlier map's deletions, so the restored services are checked once
// more. It returns the services dropped that way.
func (d *Datapath) EndRestore() []model.ServiceID {
	d.mu.Lock()
	defer d.mu.Unlock()
	var dropped []model.ServiceID
	for _, id := range d.restored {
		svc, ok := d.services[id]
		if ok && !d.previouslyOpen(svc.info.Cookie) {
			d.objs.Services.Delete(svc.info.Cookie)
			d.drop(svc)
			dropped = append(dropped, id)
		}
	}
	d.restored = nil
	if d.previous != nil {
		d.previous.Close()
		d.previous = nil
	}
	return dropped
}
