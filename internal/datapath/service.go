package datapath

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

type service struct {
	id      model.ServiceID
	info    model.SocketInfo
	indexID uint32
	regions []rules.Region
	index   *rules.ServiceIndex // what rule_index holds for it
	rules   map[model.RuleID]*installedRule
	// learning is what SetLearning set; learnID the id the data plane
	// counts it under (0: off).
	learning model.Learning
	learnID  uint32
	parser   model.Parser // SetParser's
	// owner is a TCP listener's (AddService), whose connection places
	// its connections take, in slot ownerSlot of conn_owners.
	owner     *model.ConnOwner
	ownerSlot uint32
}

// AddService registers a bound UDP socket or a listening TCP socket by its
// file descriptor: from now on the data plane answers its matching
// requests (a listener's: on the connections it accepts from now on; see
// AdoptConnection for earlier ones). info is the socket's, as
// model.InspectSocket read it: the caller inspects a socket once, for its
// own checks and for this. The fd may be closed afterwards; the service
// lives until RemoveService. A listener's connections take connection
// places of owner's uid (nil: of no uid's, without limit).
func (d *Datapath) AddService(fd int, info model.SocketInfo, owner *model.ConnOwner) (model.ServiceID, error) {
	if err := servable(fd, info); err != nil {
		return 0, err
	}
	return d.store.add(info, fd, owner)
}

// add registers info's socket, whose descriptor is fd, under a new id.
func (st *store) add(info model.SocketInfo, fd int, owner *model.ConnOwner) (model.ServiceID, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	raw, err := st.svcIDs.get()
	if err != nil {
		return 0, fmt.Errorf("registering service: %d services registered: %w", st.svcIDs.inUse(0), err)
	}
	return st.register(model.ServiceID(raw), info, fd, owner)
}

// AddSocket is AddService for a caller that has not inspected the socket
// itself (tests, benchmarks, test/hello), with no owner.
func (d *Datapath) AddSocket(fd int) (model.ServiceID, error) {
	info, err := model.InspectSocket(fd)
	if err != nil {
		return 0, err
	}
	return d.AddService(fd, info, nil)
}

// servable says why Santa cannot serve a socket, if it cannot.
func servable(fd int, info model.SocketInfo) error {
	// A raw socket of protocol UDP (CAP_NET_RAW) says IPPROTO_UDP too, and
	// "binds" the protocol number as its port: it receives no datagrams by
	// port, and no rule of Santa's may answer for it.
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("reading SO_TYPE: %w", err)
	}
	if (info.Protocol == unix.IPPROTO_UDP && typ != unix.SOCK_DGRAM) ||
		(info.Protocol == unix.IPPROTO_TCP && typ != unix.SOCK_STREAM) {
		return fmt.Errorf("socket of protocol %d is of type %d, not a datagram or stream socket: %w", info.Protocol, typ, model.ErrNotSupported)
	}
	switch info.Protocol {
	case unix.IPPROTO_UDP:
	case unix.IPPROTO_TCP:
		listening, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		if err != nil {
			return fmt.Errorf("reading SO_ACCEPTCONN: %w", err)
		}
		if listening == 0 {
			return fmt.Errorf("TCP socket is not listening: register the listening socket, its connections follow: %w", model.ErrNotSupported)
		}
	case unix.IPPROTO_MPTCP:
		return fmt.Errorf("socket is Multipath TCP, whose subflows sockmap cannot serve: %w", model.ErrNotSupported)
	default:
		return fmt.Errorf("socket protocol %d is neither UDP nor TCP: %w", info.Protocol, model.ErrNotSupported)
	}
	if info.Local.Port() == 0 {
		return fmt.Errorf("socket is not bound to a port: %w", model.ErrNotSupported)
	}
	return nil
}

// register makes info's socket a service under an id taken from svcIDs,
// which it gives back on failure; a TCP listener's connections become the
// TCP plane's, and take connection places of owner's uid. fd is the
// socket's descriptor, -1 for an earlier process's service
// (tcpPlane.addListener). Called with st.mu held.
func (st *store) register(id model.ServiceID, info model.SocketInfo, fd int, owner *model.ConnOwner) (model.ServiceID, error) {
	for _, s := range st.services {
		if s.info.Cookie == info.Cookie {
			st.svcIDs.put(uint32(id))
			return 0, fmt.Errorf("socket is already registered as service %d: %w", s.id, model.ErrExists)
		}
	}
	svc := &service{id: id, info: info, indexID: st.newIndexID(),
		index: rules.NewServiceIndex(rule.LimitsFor(info.Protocol).MaxRegions), rules: map[model.RuleID]*installedRule{}}
	if err := st.resetServiceStats(svc.id); err != nil {
		st.svcIDs.put(uint32(id))
		return 0, err
	}
	if info.Protocol == unix.IPPROTO_TCP {
		slot, err := st.tcp.owners.acquire(owner)
		if err != nil {
			st.svcIDs.put(uint32(id))
			return 0, err
		}
		svc.owner, svc.ownerSlot = owner, slot
	}
	if err := st.objs.Services.Put(info.Cookie, svc.value()); err != nil {
		st.tcp.owners.release(svc.owner)
		st.svcIDs.put(uint32(id))
		return 0, fmt.Errorf("registering service: %w", err)
	}
	if info.Protocol == unix.IPPROTO_TCP {
		if err := st.tcp.addListener(id, info, fd); err != nil {
			st.objs.Services.Delete(info.Cookie)
			st.tcp.owners.release(svc.owner)
			st.svcIDs.put(uint32(id))
			return 0, err
		}
	}
	st.services[svc.id] = svc
	return svc.id, nil
}

// RemoveService unregisters a socket and deletes its rules.
func (d *Datapath) RemoveService(id model.ServiceID) error { return d.store.remove(id) }

func (st *store) remove(id model.ServiceID) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	svc, ok := st.services[id]
	if !ok {
		return fmt.Errorf("service %d: %w", id, model.ErrUnknownService)
	}
	if err := st.objs.Services.Delete(svc.info.Cookie); err != nil {
		return fmt.Errorf("unregistering service %d: %w", id, err)
	}
	st.drop(svc)
	return nil
}

// drop forgets a service that no packet reaches any more: its index
// entries, rule slots and ids go after a grace period. Called with st.mu held.
func (st *store) drop(svc *service) {
	retired := make([]*installedRule, 0, len(svc.rules))
	for _, r := range svc.rules {
		retired = append(retired, r)
	}
	delete(st.services, svc.id)
	if svc.learnID != 0 {
		st.learn.end(svc.learnID)
	}
	if svc.parser.Kind == model.ParserMemcached {
		st.endDomain(svc.parser.Domain)
	}
	if svc.info.Protocol == unix.IPPROTO_TCP {
		st.tcp.removeListener(svc.id, svc.info)
		st.tcp.owners.release(svc.owner)
	}
	st.retireIndex(svc.indexID, svc.index.Keys())
	st.retire(retired, true)
	st.endedIDs[svc.id] = true
	st.releaseID(svc.id)
	if svc.parser.Kind == model.ParserMemcached {
		st.releaseID(svc.parser.Domain)
	}
}

// Service returns what is known of a registered socket.
func (d *Datapath) Service(id model.ServiceID) (model.SocketInfo, error) { return d.store.service(id) }

func (st *store) service(id model.ServiceID) (model.SocketInfo, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	svc, ok := st.services[id]
	if !ok {
		return model.SocketInfo{}, fmt.Errorf("service %d: %w", id, model.ErrUnknownService)
	}
	return svc.info, nil
}

// listener is what service() is, and the slot of the uid whose connection
// places its connections take.
func (st *store) listener(id model.ServiceID) (model.SocketInfo, uint32, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	svc, ok := st.services[id]
	if !ok {
		return model.SocketInfo{}, 0, fmt.Errorf("service %d: %w", id, model.ErrUnknownService)
	}
	return svc.info, svc.ownerSlot, nil
}

func (s *service) value() santaSantaService {
	v := santaSantaService{Id: uint32(s.id), IndexId: s.indexID, Proto: uint8(s.info.Protocol),
		Nregions: uint8(len(s.regions)), Learn: s.learnID, LearnOff: s.learning.KeyOffset,
		ProbePort: htons(s.learning.ProbePort), Parser: uint8(s.parser.Kind), McDomain: uint32(s.parser.Domain),
		ConnOwner: s.ownerSlot}
	for i, r := range s.regions {
		v.Regions[i] = santaSantaRegion{Off: r.Off, Len: r.Len}
	}
	return v
}

// newIndexID names a fresh generation of a service's index: when its regions
// change, the new index is written beside the old one and switched to at once.
func (st *store) newIndexID() uint32 {
	st.indexIDs++
	return st.indexIDs
}

// hasRule says whether rule id is installed.
func (st *store) hasRule(id model.RuleID) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.rules[id]
	return ok
}
