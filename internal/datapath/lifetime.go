package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/santa-offload/santa/internal/model"
)

// Services live as long as their sockets. santa_sock_release, attached to
// the root cgroup, deletes a closing socket's service in the kernel, so it
// stops answering before the socket is gone, and reports the cookie on the
// closed_sockets ring; socketWatcher then drops the service's rules. A sweep
// every sweepEvery catches what an overflowing ring lost.

const sweepEvery = 2 * time.Second

// WatchSockets makes services end with their sockets: it attaches
// santa_sock_release to the cgroup v2 hierarchy at cgroupPath (its
// "unified" child on a hybrid host; mounted only where /sys has none) and
// calls closed, from its own goroutine, for every service whose socket was
// closed, after its rules are gone.
func (d *Datapath) WatchSockets(cgroupPath string, closed func(model.ServiceID, model.SocketInfo)) error {
	d.watchMu.Lock()
	defer d.watchMu.Unlock()
	if d.watcher != nil {
		return errors.New("sockets are watched already")
	}
	root, err := cgroup2Root(cgroupPath)
	if err != nil {
		return err
	}
	l, err := d.pins.attachToCgroup(root, "link_sock_release", ebpf.AttachCgroupInetSockRelease, d.objs.SantaSockRelease)
	if err != nil {
		return err
	}
	r, err := ringbuf.NewReader(d.objs.ClosedSockets)
	if err != nil {
		l.Close()
		return fmt.Errorf("reading closed sockets: %w", err)
	}
	d.watcher = &socketWatcher{link: l, ring: r, store: d.store, closed: closed, done: make(chan struct{})}
	go d.watcher.loop()
	return nil
}

// socketWatcher drops the services of closed sockets from the store, and
// tells closed (if not nil) about each. It keeps no state of its own
// beyond its handles.
type socketWatcher struct {
	link   link.Link
	ring   *ringbuf.Reader
	store  *store
	closed func(model.ServiceID, model.SocketInfo)
	done   chan struct{} // closed when loop returns
}

func (w *socketWatcher) loop() {
	defer close(w.done)
	for {
		w.ring.SetDeadline(time.Now().Add(sweepEvery))
		rec, err := w.ring.Read()
		switch {
		case errors.Is(err, ringbuf.ErrClosed):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.sweep()
		case err == nil && len(rec.RawSample) == 8:
			w.socketClosed(binary.NativeEndian.Uint64(rec.RawSample))
		}
	}
}

// socketClosed drops the service of a closed socket, if it has one.
func (w *socketWatcher) socketClosed(cookie uint64) {
	id, info, ok := w.store.dropSocket(cookie)
	if ok && w.closed != nil {
		w.closed(id, info)
	}
}

// sweep drops services whose map entry santa_sock_release deleted without
// the ring telling: it was full.
func (w *socketWatcher) sweep() {
	for _, c := range w.store.unmapped() {
		w.socketClosed(c)
	}
}

// stop ends loop. The pinned link stays: closed sockets keep losing their
// services while no process watches.
func (w *socketWatcher) stop() {
	w.ring.Close()
	<-w.done
	w.link.Close()
}

// dropSocket drops the service of the socket cookie names, if there is
// one, and says which it was.
func (st *store) dropSocket(cookie uint64) (model.ServiceID, model.SocketInfo, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range st.services {
		if s.info.Cookie == cookie {
			st.drop(s)
			return s.id, s.info, true
		}
	}
	return 0, model.SocketInfo{}, false
}

// unmapped are the cookies of services the services map no longer holds.
func (st *store) unmapped() []uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	var cookies []uint64
	for _, s := range st.services {
		var v santaSantaService
		if err := st.objs.Services.Lookup(s.info.Cookie, &v); errors.Is(err, ebpf.ErrKeyNotExist) {
			cookies = append(cookies, s.info.Cookie)
		}
	}
	return cookies
}
