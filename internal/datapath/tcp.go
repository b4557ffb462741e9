package datapath

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// TCP (docs/tcp.md). A registered listening socket's connections are put
// into the tcp_conns sockhash: new ones by santa_tcp_sockops, attached to
// the root cgroup when the first listener is registered, which knows them
// by the listener's storage they inherit (registered_listeners), existing
// ones by AdoptConnection. The verdict and reply programs are attached to the
// sockhash itself, so they run on exactly those connections.

// tcpPlane serves registered listeners' connections: it registers
// listeners with santa_tcp_sockops, attaches the TCP hooks with the first
// one, adopts connections accepted before (AdoptConnection) and hands
// connections over from an earlier process (handover.go). Its lock guards
// its listeners, its hooks and the earlier process's connection maps, and
// runs one handover at a time. The store calls it with the store's lock
// held; it never takes the store's.
type tcpPlane struct {
	objs       tcpObjects
	owners     *connOwners // conn_owners: the uids' connection places (connplaces.go)
	services   *ebpf.Map   // santa_udp's, which the handover reads
	pins       *pins
	cgroupPath string

	mu        sync.Mutex
	listeners map[model.ServiceID]uint64 // the registered listeners' cookies
	hooks     []link.Link                // root cgroup links of the TCP programs, once a listener is registered
	prev      *connMaps                  // an earlier process's connections, until HandOverConnections
}

func newTCPPlane(objs tcpObjects, services *ebpf.Map, p *pins, cgroupPath string) (*tcpPlane, error) {
	owners, err := newConnOwners(objs.ConnOwners)
	if err != nil {
		return nil, err
	}
	return &tcpPlane{objs: objs, owners: owners, services: services, pins: p, cgroupPath: cgroupPath,
		listeners: make(map[model.ServiceID]uint64)}, nil
}

// close releases this process's handles: pinned hooks stay attached.
func (t *tcpPlane) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.prev != nil {
		t.prev.Close()
		t.prev = nil
	}
	closeLinks(t.hooks)
	return errors.Join(t.owners.close(), t.objs.Close())
}

// addListener makes the listening socket of service id's future
// connections Santa's: those it accepts from now on. fd is the socket's
// descriptor, whose storage in registered_listeners names it to
// santa_tcp_sockops, and the kernel copies that into each connection the
// socket accepts. fd is -1 for a listener of an earlier process
// (RestoreService): the storage that process set on it is still there, in
// the map this process reuses (Open, KeepLinks).
func (t *tcpPlane) addListener(id model.ServiceID, info model.SocketInfo, fd int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.attachHooks()
	if err == nil && fd >= 0 {
		err = t.markListener(fd, info.Cookie)
	}
	if err != nil {
		// The service was in the services map from before this lock was
		// taken: a handover that ran meanwhile may have moved the
		// listener's connections in. They go back to the application.
		t.releaseConnections(info.Cookie)
		return err
	}
	t.listeners[id] = info.Cookie
	return nil
}

// markListener sets the storage of fd's socket, whose cookie is to be
// cookie, to that cookie. Its value is always its own socket's cookie, and
// santa_tcp_sockops serves a connection whose inherited cookie is a
// registered TCP service's: a socket no longer registered, or registered
// again, needs no other value.
func (t *tcpPlane) markListener(fd int, cookie uint64) error {
	own, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return fmt.Errorf("reading SO_COOKIE: %w", err)
	}
	if own != cookie {
		return fmt.Errorf("socket's cookie %d is not the registered one, %d: %w", own, cookie, model.ErrNotListener)
	}
	if err := t.objs.RegisteredListeners.Update(int32(fd), cookie, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("registering listener: %w", err)
	}
	return nil
}

// removeListener forgets the listener of service id, which is gone: its
// connections pass from now on, new ones are not added (the service is
// out of the services map, which santa_tcp_sockops checks: the listener's
// storage stays, as no fd of it is held here, until the socket closes or
// listens again), and its idle connections leave the sockhash
// (releaseConnections; best effort: connections left in the sockhash pass
// everything).
func (t *tcpPlane) removeListener(id model.ServiceID, info model.SocketInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.listeners, id)
	t.releaseConnections(info.Cookie)
}

// attachTCPHooks attaches the TCP programs that run on the root cgroup's
// sockets, once: santa_tcp_sockops (new connections, and their end),
// santa_tcp_release (the end of adopted ones), santa_tcp_accepted and
// santa_tcp_get{peer,sock}name{4,6} (requests that came before accept(),
// at the application's first setsockopt, getpeername or getsockname on
// the connection) and santa_tcp_hold_fin (a client's FIN that would
// overtake the kernel's replies). Called with t.mu held.
func (t *tcpPlane) attachHooks() error {
	if t.hooks != nil {
		return nil
	}
	root, err := cgroup2Root(t.cgroupPath)
	if err != nil {
		return err
	}
	hooks := []struct {
		pin  string
		typ  ebpf.AttachType
		prog *ebpf.Program
	}{
		{"link_tcp_sockops", ebpf.AttachCGroupSockOps, t.objs.SantaTcpSockops},
		{"link_tcp_release", ebpf.AttachCgroupInetSockRelease, t.objs.SantaTcpRelease},
		{"link_tcp_accepted", ebpf.AttachCGroupSetsockopt, t.objs.SantaTcpAccepted},
		{"link_tcp_getpeername4", ebpf.AttachCgroupInet4GetPeername, t.objs.SantaTcpGetpeername4},
		{"link_tcp_getpeername6", ebpf.AttachCgroupInet6GetPeername, t.objs.SantaTcpGetpeername6},
		{"link_tcp_getsockname4", ebpf.AttachCgroupInet4GetSockname, t.objs.SantaTcpGetsockname4},
		{"link_tcp_getsockname6", ebpf.AttachCgroupInet6GetSockname, t.objs.SantaTcpGetsockname6},
		{"link_tcp_hold_fin", ebpf.AttachCGroupInetIngress, t.objs.SantaTcpHoldFin},
	}
	links := make([]link.Link, 0, len(hooks))
	for _, h := range hooks {
		l, err := t.pins.attachToCgroup(root, h.pin, h.typ, h.prog)
		if err != nil {
			closeLinks(links)
			return err
		}
		links = append(links, l)
	}
	t.hooks = links
	return nil
}

// AdoptConnection puts an established connection, accepted on the
// registered listener svc before it was registered, under its rules
// (internal/daemon's AdoptConnections finds such connections). Only
// an idle connection is adopted (nothing unread, nothing unsent, no data
// received after the last sent, no task blocked in a call on it): the
// application may be in the middle of a reply otherwise, which a kernel
// answer must not overtake, or asleep in a receive that would never see
// the next request. The fd may be closed afterwards.
func (d *Datapath) AdoptConnection(svc model.ServiceID, fd int) error {
	conn, err := model.InspectSocket(fd)
	if err != nil {
		return err
	}
	listener, owner, err := d.store.listener(svc)
	if err != nil {
		return err
	}
	if err := belongsTo(conn, listener); err != nil {
		return err
	}
	return d.tcp.adopt(svc, listener, conn, fd, owner)
}

// adopt puts conn, whose descriptor is fd, in the sockhash as a
// connection of listener, service svc's socket, on a connection place of
// the listener's uid (owner: its slot).
func (t *tcpPlane) adopt(svc model.ServiceID, listener, conn model.SocketInfo, fd int, owner uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.listeners[svc] != listener.Cookie {
		return fmt.Errorf("service %d: %w", svc, model.ErrUnknownService) // removed meanwhile
	}
	var known santaTcpSantaConn
	if t.objs.Connections.Lookup(conn.Cookie, &known) == nil && known.Listener == listener.Cookie {
		return nil // santa_tcp_sockops added it already
	}
	tcpInfo, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return fmt.Errorf("reading TCP_INFO: %w", err)
	}
	if tcpInfo.State != unix.BPF_TCP_ESTABLISHED {
		return fmt.Errorf("connection is in TCP state %d, not established: %w", tcpInfo.State, model.ErrBusy)
	}
	unread, err1 := unix.IoctlGetInt(fd, unix.SIOCINQ)
	unsent, err2 := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("reading the connection's queues: %w", err)
	}
	if unread != 0 || unsent != 0 {
		return fmt.Errorf("%d bytes unread, %d unsent: %w", unread, unsent, model.ErrBusy)
	}
	// Data came after the last the application sent, or it never sent
	// any: it may be answering a request it read, and a kernel reply to
	// the next one would overtake its reply. Times are ticks (4 ms at
	// HZ=250): a request that came in the same tick as the last data
	// left is not seen; nor is a reply the application has begun and not
	// finished, or requests it read together and answers one by one
	// (docs/tcp.md, "Attach").
	if tcpInfo.Bytes_received > 0 && tcpInfo.Bytes_sent == 0 {
		return fmt.Errorf("%d bytes received, none sent: the application may be answering them: %w",
			tcpInfo.Bytes_received, model.ErrBusy)
	}
	if tcpInfo.Last_data_recv < tcpInfo.Last_data_sent {
		return fmt.Errorf("data received %d ms ago, after the last sent %d ms ago: the application may be answering it: %w",
			tcpInfo.Last_data_recv, tcpInfo.Last_data_sent, model.ErrBusy)
	}
	// A task asleep in a receive on the connection: that receive began
	// before the socket joined the sockhash and reads the receive queue
	// only, while the verdict passes what arrives (a task is blocked)
	// into the psock's queue. The request would be neither answered nor
	// read. The setsockopt hook tells (santa_tcp_accepted).
	if err := unix.SetsockoptInt(fd, model.SockoptLevel, int(santaTcpSantaTcpProbeSANTA_SO_ADOPTABLE), 1); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("a task is blocked in a call on the connection: %w", model.ErrBusy)
		}
		return fmt.Errorf("asking whether a task is blocked on the connection: %w", err)
	}
	// As santa_tcp_sockops does for new connections: replies are whole
	// messages, Nagle's algorithm would hold them for the client's ACK.
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fmt.Errorf("setting TCP_NODELAY: %w", err)
	}
	// Its place, taken as santa_conn_new takes one, and given back by
	// whoever deletes its state (santa_conn_delete), here too.
	if !t.owners.take(owner) {
		return fmt.Errorf("its uid holds every connection place its quota allows: %w", model.ErrCapacity)
	}
	state := santaTcpSantaConn{Listener: listener.Cookie, Ooopack: tcpInfo.Rcv_ooopack, Owner: owner}
	if err := t.objs.Connections.Update(conn.Cookie, state, ebpf.UpdateNoExist); err != nil {
		t.owners.give(owner)
		return fmt.Errorf("adopting connection: %w", err)
	}
	if err := t.objs.TcpConns.Update(conn.Cookie, uint64(fd), ebpf.UpdateNoExist); err != nil {
		// Unless the connection's end deleted it meanwhile, and gave
		// its place back.
		if t.objs.Connections.Delete(conn.Cookie) == nil {
			t.owners.give(owner)
		}
		return fmt.Errorf("adding connection to the sockhash: %w", err)
	}
	return nil
}

// belongsTo says why conn is not a connection accepted on listener.
func belongsTo(conn, listener model.SocketInfo) error {
	switch {
	case listener.Protocol != unix.IPPROTO_TCP:
		return fmt.Errorf("service is not a TCP listener: %w", model.ErrNotListener)
	case conn.Protocol != unix.IPPROTO_TCP:
		return fmt.Errorf("socket is not TCP: %w", model.ErrNotListener)
	case conn.NetnsCookie != listener.NetnsCookie:
		return fmt.Errorf("connection is in another network namespace: %w", model.ErrNotListener)
	case conn.Local.Port() != listener.Local.Port():
		return fmt.Errorf("connection's local port %d is not the listener's %d: %w",
			conn.Local.Port(), listener.Local.Port(), model.ErrNotListener)
	}
	la, ca := listener.Local.Addr(), conn.Local.Addr()
	if la.IsUnspecified() && (la.Is6() || ca.Is4() || ca.Is4In6()) || la == ca || la.Unmap() == ca.Unmap() {
		return nil
	}
	return fmt.Errorf("connection's local address %s is not the listener's %s: %w", ca, la, model.ErrNotListener)
}
