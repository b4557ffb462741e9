package mcagent

import (
	"errors"
	"maps"
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
		a.scans.Failed(a.log, "scanning memcached's sockets", err)
		return nil
	case err != nil:
		a.failed("listing services", err)
		return nil
	}
	a.scans.Worked(a.log, "scanning memcached's sockets")
	a.takes.Keep(sv.Fresh)
	for _, s := range a.services {
		if why := sv.Gone(s.inode, s.id); why != "" && a.services[s.id] == s {
			a.forget(s, why, sv)
		}
	}
	if a.stranded(sv) {
		return nil
	}
	var listeners, udps []server.Socket
	for _, s := range sv.Fresh {
		if s.TCP {
			listeners = append(listeners, s)
		} else {
			udps = append(udps, s)
		}
	}
	taken := a.takeAll(sd, listeners, sv.ByCookie)
	if a.leader == nil {
		a.leaderFirst(sd, taken)
	}
	if a.leader != nil || len(taken) > 0 {
		taken = append(taken, a.takeAll(sd, udps, sv.ByCookie)...) // into a domain only
	}
	for _, t := range taken {
		if a.sd == nil || !t.s.TCP && a.leader == nil {
			return nil // no domain to join: the next scan takes it up again
		}
		a.mark(sd, t)
	}
	return a.checkUDP(sv.Fresh)
}

// taken is a socket taken up as a service, not marked yet.
type taken struct {
	s       server.Socket
	info    client.ServiceInfo
	adopted bool
}

// takeAll takes sockets up as services. Called with a.mu held.
func (a *agent) takeAll(sd Santad, sockets []server.Socket, byCookie map[uint64]client.ServiceInfo) []taken {
	var out []taken
	for _, s := range sockets {
		info, adopted, err := santadconn.TakeUp(sd, a.take, s, byCookie)
		switch {
		case errors.Is(err, santadconn.ErrTake) || santadconn.Refused(err):
			a.takes.Failed(a.log, s.Inode, "taking up "+s.Local.String(), err)
			continue
		case err != nil:
			a.failed("attaching "+s.Local.String(), err)
			return nil
		case !adopted:
			a.stats.attached++
		}
		a.takes.Worked(a.log, s.Inode, "taking up "+s.Local.String())
		out = append(out, taken{s, info, adopted})
	}
	return out
}

// leaderFirst puts first among listeners the one to start the domain: one
// that leads a domain in santad already (an agent before this one marked
// it, and MEMCACHED_STATS says so), else the one santad has had longest
// (the lowest id). A connection counts its writes in the domain its
// listener was in when it started, for good: the domain of a listener
// with connections must not change. Called with a.mu held.
func (a *agent) leaderFirst(sd Santad, listeners []taken) {
	if len(listeners) == 0 {
		return
	}
	lead := 0
	for i, t := range listeners {
		if t.info.ServiceID < listeners[lead].info.ServiceID {
			lead = i
		}
	}
	for i, t := range listeners {
		if !t.adopted {
			continue
		}
		if st, err := sd.MemcachedStats(t.info.ServiceID); err == nil && st.Domain == t.info.ServiceID {
			lead = i
			break
		}
	}
	listeners[0], listeners[lead] = listeners[lead], listeners[0]
}

// stranded is whether a listener whose domain ended while it lived is
// still memcached's: its connections go on counting their
// writes in that dead domain, where no other domain sees them, so nothing
// may be offloaded until they are gone. It says so once. Called with a.mu
// held.
func (a *agent) stranded(sv santadconn.Survey) bool {
	present := maps.Clone(sv.Live)
	for _, s := range sv.Fresh {
		present[s.Inode] = true
	}
	for inode := range a.tainted {
		if !present[inode] {
			delete(a.tainted, inode)
		}
	}
	if len(a.tainted) > 0 && !a.warnedTainted {
		a.log.Error("a listener of memcached's lost its domain while it lived (its leader's service was detached by " +
			"another client?): writes on its connections can no longer be seen; nothing is offloaded until memcached restarts")
	}
	a.warnedTainted = len(a.tainted) > 0
	return len(a.tainted) > 0
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
// of it answers again): its other services still there (in sv) are
// detached; its listeners still there (the leader too, if only its
// service ended) are stranded (their connections count their writes in
// the dead domain), its UDP sockets are taken again into a new domain.
// Called with a.mu held.
func (a *agent) forget(s *service, why string, sv santadconn.Survey) {
	a.log.Info("service ended", "service", s.id, "addr", s.local, "tcp", s.tcp, "why", why)
	delete(a.services, s.id)
	delete(a.sockets, s.inode)
	if s == a.leader {
		if sv.Live[s.inode] {
			a.tainted[s.inode] = true // its service ended, not its socket
		}
		for _, o := range a.services {
			if sv.Gone(o.inode, o.id) != "" {
				continue // ended too
			}
			if o.tcp {
				a.tainted[o.inode] = true
			}
			if err := a.sd.Detach(o.id); err != nil {
				a.failed("detaching a service of an ended domain", err)
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

// mark marks a service memcached's: a listener starts the domain if
// there is none, and joins it otherwise; a UDP socket joins it and
// learns. Called with a.mu held.
func (a *agent) mark(sd Santad, t taken) {
	sv := &service{id: t.info.ServiceID, inode: t.s.Inode, tcp: t.s.TCP, local: t.s.Local, rules: map[*key]uint32{},
		byRule: map[uint32]*key{}, hits: map[uint32]uint64{}}
	// At once: the connections a listener accepts from now on are parsed
	// from their first byte. Marking again (an adopted service) starts a
	// new life: no guard of before answers.
	domain := sv.id
	if a.leader != nil {
		domain = a.leader.id
	}
	if err := sd.SetParser(sv.id, client.Parser{Kind: client.ParserMemcached, Domain: domain}); err != nil {
		a.failed("marking "+t.s.Local.String()+" memcached's", err)
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
	a.sockets[t.s.Inode] = sv
	a.log.Info("service", "service", sv.id, "addr", t.s.Local, "tcp", sv.tcp, "domain", domain, "pid", t.s.Holder.PID,
		"adopted", t.adopted)
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
	if err := deleteIDs(sd, sv.id, ids); err != nil {
		a.failed("deleting the rules the agent does not know", err)
		return false
	}
	a.log.Info("deleted the rules the agent does not know", "service", sv.id, "rules", len(ids))
	return true
}
