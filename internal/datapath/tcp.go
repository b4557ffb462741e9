package datapath

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// TCP (docs/tcp.md). A registered listening socket's connections are put
// into the tcp_conns sockhash: new ones by santa_tcp_sockops, attached to
// the root cgroup when the first listener is registered, existing ones by
// AdoptConnection. The verdict and reply programs are attached to the
// sockhash itself, so they run on exactly those connections.

// tcpObjects are the TCP programs and the maps only they use; the maps
// they share with santa_udp are santaObjects' (loadTCP).
type tcpObjects struct {
	santaTcpPrograms
	Connections  *ebpf.Map `ebpf:"connections"`
	Listeners    *ebpf.Map `ebpf:"listeners"`
	TcpConns     *ebpf.Map `ebpf:"tcp_conns"`
	TcpPathStats *ebpf.Map `ebpf:"tcp_path_stats"`
	ReplyMemory  *ebpf.Map `ebpf:"reply_memory"`
}

func (o *tcpObjects) Close() error {
	return errors.Join(o.santaTcpPrograms.Close(), o.Connections.Close(), o.Listeners.Close(),
		o.TcpConns.Close(), o.TcpPathStats.Close(), o.ReplyMemory.Close())
}

// loadTCP loads the TCP programs onto d's maps and attaches verdict and
// reply to the sockhash. maxConns bounds the connections under Santa.
func (d *Datapath) loadTCP(maxConns, maxServices uint32) error {
	spec, err := loadSantaTcp()
	if err != nil {
		return fmt.Errorf("loading TCP BPF spec: %w", err)
	}
	spec.Maps["connections"].MaxEntries = maxConns
	spec.Maps["tcp_conns"].MaxEntries = maxConns
	spec.Maps["listeners"].MaxEntries = maxServices
	if err := d.index.setMask(spec); err != nil {
		return err
	}
	shared := map[string]*ebpf.Map{
		"services": d.objs.Services, "rule_index": d.objs.RuleIndex,
		"rules_small": d.objs.RulesSmall, "rules_medium": d.objs.RulesMedium,
		"rules_large": d.objs.RulesLarge, "rules_huge": d.objs.RulesHuge,
		"rule_stats": d.objs.RuleStats, "service_stats": d.objs.ServiceStats,
	}
	if err := loadOnto(spec, &d.tcp, shared, "TCP BPF objects"); err != nil {
		return err
	}
	for _, a := range []struct {
		prog   *ebpf.Program
		attach ebpf.AttachType
	}{{d.tcp.SantaTcpVerdict, ebpf.AttachSkSKBVerdict}, {d.tcp.SantaTcpReply, ebpf.AttachSkMsgVerdict}} {
		err := link.RawAttachProgram(link.RawAttachProgramOptions{Target: d.tcp.TcpConns.FD(), Program: a.prog, Attach: a.attach})
		if err != nil {
			d.tcp.Close()
			return fmt.Errorf("attaching %s to the connections sockhash: %w", a.prog, err)
		}
	}
	return nil
}

// loadOnto loads spec's objects into objs, with the maps named in shared
// replaced by those (sized as they are). what names the objects in errors.
func loadOnto(spec *ebpf.CollectionSpec, objs any, shared map[string]*ebpf.Map, what string) error {
	for name, m := range shared {
		info, err := m.Info()
		if err != nil {
			return fmt.Errorf("reading map %s: %w", name, err)
		}
		spec.Maps[name].MaxEntries = info.MaxEntries
	}
	if err := spec.LoadAndAssign(objs, &ebpf.CollectionOptions{MapReplacements: shared}); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return fmt.Errorf("loading %s: %+v", what, verr)
		}
		return fmt.Errorf("loading %s: %w", what, err)
	}
	return nil
}

// listenerKey is how santa_tcp_sockops finds a connection's listener.
func listenerKey(info model.SocketInfo) santaTcpSantaListenerKey {
	k := santaTcpSantaListenerKey{Netns: info.NetnsCookie, Port: info.Local.Port()}
	a := info.Local.Addr()
	if a.Is4() {
		a = netip.AddrFrom16(a.As16()) // ::ffff:a.b.c.d, 0.0.0.0 too
	}
	k.Addr = a.As16()
	return k
}

// addListener makes a listening socket's future connections Santa's.
// Called with d.mu held.
func (d *Datapath) addListener(info model.SocketInfo) error {
	if err := d.attachTCPHooks(); err != nil {
		return err
	}
	key := listenerKey(info)
	if err := d.tcp.Listeners.Update(key, info.Cookie, ebpf.UpdateNoExist); errors.Is(err, ebpf.ErrKeyExist) {
		return fmt.Errorf("another listening socket on %s in this network namespace is registered "+
			"(of a SO_REUSEPORT group, register one): %w", info.Local, model.ErrExists)
	} else if err != nil {
		return fmt.Errorf("registering listener: %w", err)
	}
	return nil
}

// removeListener forgets a listener: its connections pass from now on
// (their service is gone), new ones are not added. Called with d.mu held.
func (d *Datapath) removeListener(info model.SocketInfo) error {
	var cookie uint64
	key := listenerKey(info)
	if err := d.tcp.Listeners.Lookup(key, &cookie); err != nil || cookie != info.Cookie {
		return nil
	}
	if err := d.tcp.Listeners.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unregistering listener: %w", err)
	}
	return nil
}

// attachTCPHooks attaches the TCP programs that run on the root cgroup's
// sockets, once: santa_tcp_sockops (new connections, and their end),
// santa_tcp_release (the end of adopted ones), santa_tcp_accepted and
// santa_tcp_get{peer,sock}name{4,6} (requests that came before accept(),
// at the application's first setsockopt, getpeername or getsockname on
// the connection) and santa_tcp_hold_fin (a client's FIN that would
// overtake the kernel's replies). Called with d.mu held.
func (d *Datapath) attachTCPHooks() error {
	if d.tcpHooks != nil {
		return nil
	}
	root, err := cgroup2Root(d.cgroupPath)
	if err != nil {
		return err
	}
	hooks := []struct {
		pin  string
		typ  ebpf.AttachType
		prog *ebpf.Program
	}{
		{"link_tcp_sockops", ebpf.AttachCGroupSockOps, d.tcp.SantaTcpSockops},
		{"link_tcp_release", ebpf.AttachCgroupInetSockRelease, d.tcp.SantaTcpRelease},
		{"link_tcp_accepted", ebpf.AttachCGroupSetsockopt, d.tcp.SantaTcpAccepted},
		{"link_tcp_getpeername4", ebpf.AttachCgroupInet4GetPeername, d.tcp.SantaTcpGetpeername4},
		{"link_tcp_getpeername6", ebpf.AttachCgroupInet6GetPeername, d.tcp.SantaTcpGetpeername6},
		{"link_tcp_getsockname4", ebpf.AttachCgroupInet4GetSockname, d.tcp.SantaTcpGetsockname4},
		{"link_tcp_getsockname6", ebpf.AttachCgroupInet6GetSockname, d.tcp.SantaTcpGetsockname6},
		{"link_tcp_hold_fin", ebpf.AttachCGroupInetIngress, d.tcp.SantaTcpHoldFin},
	}
	links := make([]link.Link, 0, len(hooks))
	for _, h := range hooks {
		l, err := d.attachToCgroup(root, h.pin, h.typ, h.prog)
		if err != nil {
			closeLinks(links)
			return err
		}
		links = append(links, l)
	}
	d.tcpHooks = links
	return nil
}

// AdoptConnection puts an established connection, accepted on the
// registered listener svc before it was registered, under its rules
// (internal/daemon's AdoptConnections finds such connections). Only
// an idle connection is adopted (nothing unread, nothing unsent): the
// application may be in the middle of a reply otherwise, which a kernel
// answer must not overtake. The fd may be closed afterwards.
func (d *Datapath) AdoptConnection(svc model.ServiceID, fd int) error {
	info, err := model.InspectSocket(fd)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.services[svc]
	if !ok {
		return fmt.Errorf("service %d: %w", svc, model.ErrUnknownService)
	}
	if err := belongsTo(info, s.info); err != nil {
		return err
	}
	var known santaTcpSantaConn
	if d.tcp.Connections.Lookup(info.Cookie, &known) == nil && known.Listener == s.info.Cookie {
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
	// As santa_tcp_sockops does for new connections: replies are whole
	// messages, Nagle's algorithm would hold them for the client's ACK.
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fmt.Errorf("setting TCP_NODELAY: %w", err)
	}
	conn := santaTcpSantaConn{Listener: s.info.Cookie, Ooopack: tcpInfo.Rcv_ooopack}
	if err := d.tcp.Connections.Update(info.Cookie, conn, ebpf.UpdateNoExist); err != nil {
		return fmt.Errorf("adopting connection: %w", err)
	}
	if err := d.tcp.TcpConns.Update(info.Cookie, uint64(fd), ebpf.UpdateNoExist); err != nil {
		d.tcp.Connections.Delete(info.Cookie)
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
