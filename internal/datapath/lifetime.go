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
// closed_sockets ring; watchLoop then drops the service's rules. A sweep
// every sweepEvery catches what an overflowing ring lost.

const sweepEvery = 2 * time.Second

// WatchSockets makes services end with their sockets: it attaches
// santa_sock_release to the cgroup v2 hierarchy at cgroupPath (its
// "unified" child on a hybrid host; mounted only where /sys has none) and
// calls closed, from its own goroutine, for every service whose socket was
// closed, after its rules are gone.
func (d *Datapath) WatchSockets(cgroupPath string, closed func(model.ServiceID, model.SocketInfo)) error {
	if d.watcher != nil {
		return errors.New("sockets are watched already")
	}
	root, err := cgroup2Root(cgroupPath)
	if err != nil {
		return err
	}
	l, err := d.attachToCgroup(root, "link_sock_release", ebpf.AttachCgroupInetSockRelease, d.objs.SantaSockRelease)
	if err != nil {
		return err
	}
	r, err := ringbuf.NewReader(d.objs.ClosedSockets)
	if err != nil {
		l.Close()
		return fmt.Errorf("reading closed sockets: %w", err)
	}
	d.watcher = &socketWatcher{link: l, ring: r, done: make(chan struct{})}
	go d.watchLoop(closed)
	return nil
}

type socketWatcher struct {
	link link.Link
	ring *ringbuf.Reader
	done chan struct{} // closed when watchLoop returns
}

func (d *Datapath) watchLoop(closed func(model.ServiceID, model.SocketInfo)) {
	defer close(d.watcher.done)
	ring := d.watcher.ring
	for {
		ring.SetDeadline(time.Now().Add(sweepEvery))
		rec, err := ring.Read()
		switch {
		case errors.Is(err, ringbuf.ErrClosed):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			d.sweep(closed)
		case err == nil && len(rec.RawSample) == 8:
			d.socketClosed(binary.NativeEndian.Uint64(rec.RawSample), closed)
		}
	}
}

// socketClosed drops the service of a closed socket, if it has one.
func (d *Datapath) socketClosed(cookie uint64, closed func(model.ServiceID, model.SocketInfo)) {
	d.mu.Lock()
	var gone *service
	for _, s := range d.services {
		if s.info.Cookie == cookie {
			gone = s
			d.drop(s)
			break
		}
	}
	d.mu.Unlock()
	if gone != nil && closed != nil {
		closed(gone.id, gone.info)
	}
}

// sweep drops services whose map entry santa_sock_release deleted without
// the ring telling: it was full.
func (d *Datapath) sweep(closed func(model.ServiceID, model.SocketInfo)) {
	d.mu.Lock()
	var cookies []uint64
	for _, s := range d.services {
		var v santaSantaService
		if err := d.objs.Services.Lookup(s.info.Cookie, &v); errors.Is(err, ebpf.ErrKeyNotExist) {
			cookies = append(cookies, s.info.Cookie)
		}
	}
	d.mu.Unlock()
	for _, c := range cookies {
		d.socketClosed(c, closed)
	}
}

// stopWatching ends watchLoop. The pinned link stays: closed sockets keep
// losing their services while no process watches.
func (d *Datapath) stopWatching() {
	if d.watcher == nil {
		return
	}
	d.watcher.ring.Close()
	<-d.watcher.done
	d.watcher.link.Close()
}
