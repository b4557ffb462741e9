package mcagent

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/santadconn"
	"github.com/santa-offload/santa/internal/offload/server"
)

// scan follows memcached: services whose socket closed are forgotten
// (santad ended them with the socket, and their rules); new sockets are
// attached, or taken up if santad has them already (after a restart of
// santad or of the agent: known by socket cookie). TCP listeners come
// first: the first starts the domain, and a UDP socket is attached only
// into a domain, so that no rule can answer before memcached's TCP writes
// are seen. It returns ErrNoUDP once memcached has listened on TCP
// without a UDP socket for noUDPGrace, unless it had one before.
func (a *agent) scan() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	sd, err := a.santad()
	if err != nil {
		return nil
	}
	sv, err := santadconn.TakeSurvey(sd, a.finder, a.sockets)
	switch {
	case errors.Is(err, santadconn.ErrScan):
		a.log.Warn("scanning memcached's sockets", "err", err)
		return nil
	case err != nil:
		a.failed("listing services", err)
		return nil
	}
	for _, s := range a.services {
		if why := sv.Gone(s.inode, s.id); why != "" {
			a.forget(s, why)
		}
	}
	fresh := sv.Fresh
	// Listeners first, then UDP sockets.
	slices.SortStableFunc(fresh, func(x, y server.Socket) int {
		return cmp.Compare(boolInt(!x.TCP), boolInt(!y.TCP))
	})
	for _, s := range fresh {
		if !s.TCP && a.leader == nil {
			break // into a domain only; the next scan finds it again
		}
		a.attach(sd, s, sv.ByCookie)
		if a.sd == nil {
			return nil
		}
	}
	return a.checkUDP(fresh)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkUDP notes whether memcached has a UDP socket and a TCP listener,
// and warns once of either missing (a UDP socket is attached only into
// the domain a listener starts). Called with a.mu held.
func (a *agent) checkUDP(fresh []server.Socket) error {
	tcp, udp := false, false
	for _, s := range a.services {
		tcp, udp = tcp || s.tcp, udp || !s.tcp
	}
	for _, s := range fresh {
		tcp, udp = tcp || s.TCP, udp || !s.TCP
	}
	if udp && !tcp && !a.warnedNoTCP {
		a.log.Warn("memcached has a UDP socket but no TCP listener on port: nothing is offloaded without one "+
			"(its writes come over TCP and must be seen); is port memcached's -p?", "port", a.cfg.Port, "udp_port", a.cfg.udpPort())
	}
	a.warnedNoTCP = udp && !tcp
	a.everUDP = a.everUDP || len(a.udpServices()) > 0
	switch {
	case udp:
		a.tcpOnly = time.Time{}
	case !tcp:
		a.tcpOnly = time.Time{}
	case a.tcpOnly.IsZero():
		a.tcpOnly = a.now()
		a.log.Warn("memcached listens on TCP but has no UDP socket (-U)", "udp_port", a.cfg.udpPort())
	case !a.everUDP && a.now().Sub(a.tcpOnly) >= noUDPGrace:
		return ErrNoUDP
	}
	return nil
}

// forget drops a service. A domain that lost its leader is dead (no guard
// of it answers again): its other services are detached, and taken again
// into a new domain at the next scan. Called with a.mu held.
func (a *agent) forget(s *service, why string) {
	a.log.Info("service ended", "service", s.id, "addr", s.local, "tcp", s.tcp, "why", why)
	delete(a.services, s.id)
	delete(a.sockets, s.inode)
	if s == a.leader {
		for _, o := range a.services {
			if err := a.sd.Detach(o.id); err != nil {
				a.failed("detaching a service of an ended domain", err) // refused: its socket closed too
				if a.sd == nil {
					return // the domain ended with the connection
				}
			}
		}
		a.endDomain()
		return
	}
	if len(a.udpServices()) == 0 {
		a.keys = map[string]*key{} // their rules ended with the sockets
	}
}

// attach makes socket s a service of the agent's and marks it memcached's:
// a listener starts the domain if there is none, and joins it otherwise;
// a UDP socket joins it and learns. Called with a.mu held.
func (a *agent) attach(sd Santad, s server.Socket, byCookie map[uint64]client.ServiceInfo) {
	info, adopted, err := santadconn.TakeUp(sd, a.take, s, byCookie)
	switch {
	case errors.Is(err, santadconn.ErrTake):
		a.log.Warn("taking memcached's socket", "err", err)
		return
	case err != nil:
		a.failed("attaching "+s.Local.String(), err)
		return
	case !adopted:
		a.stats.attached++
	}
	sv := &service{id: info.ServiceID, inode: s.Inode, tcp: s.TCP, local: s.Local, rules: map[*key]uint32{},
		byRule: map[uint32]*key{}, hits: map[uint32]uint64{}}
	// Marked at once: the connections a listener accepts from now on are
	// parsed from their first byte. Marking again (an adopted service)
	// starts a new life: no guard of before answers.
	domain := sv.id
	if a.leader != nil {
		domain = a.leader.id
	}
	if err := sd.SetParser(sv.id, client.Parser{Kind: client.ParserMemcached, Domain: domain}); err != nil {
		a.failed("marking "+s.Local.String()+" memcached's", err)
		return
	}
	if a.leader == nil {
		a.leader = sv
		// The agent's own connection must be one the domain parses.
		a.items.Reset()
	}
	if !sv.tcp {
		l := client.Learning{KeyOffset: keyOffset, ProbePort: a.probe.Port(), Enabled: true}
		if err := sd.SetLearning(sv.id, l); err != nil {
			a.failed("enabling learning", err)
			return
		}
		if !a.clearRules(sd, sv) {
			return
		}
	}
	a.services[sv.id] = sv
	a.sockets[s.Inode] = sv
	a.log.Info("service", "service", sv.id, "addr", s.Local, "tcp", sv.tcp, "domain", domain, "pid", s.Holder.PID, "adopted", adopted)
	if !sv.tcp {
		a.addKeys(sd, sv, a.sortedKeys())
	}
}

// clearRules deletes the rules a UDP service has when the agent takes it
// up: left by an agent that died, guarded in a domain's earlier life.
// Called with a.mu held.
func (a *agent) clearRules(sd Santad, sv *service) bool {
	var ids []uint32
	for e, err := range sd.Rules(sv.id) {
		if err != nil {
			a.failed("listing rules", err)
			return false
		}
		ids = append(ids, e.RuleID)
	}
	if len(ids) == 0 {
		return true
	}
	if err := sd.DeleteRules(sv.id, ids); err != nil {
		a.failed("deleting the rules the agent does not know", err)
		return false
	}
	a.log.Info("deleted the rules the agent does not know", "service", sv.id, "rules", len(ids))
	return true
}
