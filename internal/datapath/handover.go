package datapath

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/netns"
)

// Handing over TCP connections (docs/tcp.md, "Restarts"). The connections an
// earlier process's data plane served stay in its sockhash, which they keep
// alive, and run its programs with its rules for as long as they live. A
// new process takes them into its own data plane, or gives them back to
// their applications, with santa_tcp_handover (bpf/santa_handover.bpf.c).
// The same program releases an unregistered listener's connections.

// connHeadSize is the part of a connection's entry that every santad since
// connection places writes alike (SANTA_CONN_HEAD_SIZE).
const connHeadSize = uint32(unsafe.Offsetof(santaHandoverSantaConn{}.Reply))

// Between passes over busy connections (a bounced request waiting for its
// reply, passed data not read yet), and how many passes before giving up.
const (
	handOverRetry  = 20 * time.Millisecond
	handOverPasses = 10
)

// connMaps are a data plane's connection state and sockhash: an earlier
// process's, held from before its pins are replaced until
// HandOverConnections, or this one's, to release an unregistered
// listener's connections.
type connMaps struct {
	connections, sockets *ebpf.Map
	own                  bool // this data plane's: a connection that leaves them gives its place back
}

func (m *connMaps) Close() error {
	return errors.Join(m.connections.Close(), m.sockets.Close())
}

// keepPreviousTCP holds on to the connection maps pinned in dir, if any.
func (t *tcpPlane) keepPrevious(dir string) {
	conns, err := ebpf.LoadPinnedMap(filepath.Join(dir, "connections"), nil)
	if err != nil {
		return // nothing to hand over
	}
	sockets, err := ebpf.LoadPinnedMap(filepath.Join(dir, "tcp_conns"), nil)
	if err != nil {
		conns.Close()
		return
	}
	t.prev = &connMaps{connections: conns, sockets: sockets}
}

// HandOverConnections takes the connections of the data plane an earlier
// process pinned at this one's pin path into this one: each idle one whose
// listener is registered here (RestoreService) moves with its state, the
// others are released to their applications. Busy connections are tried
// again for a while; those still busy then stay in the earlier data plane,
// passing everything, until ReleaseLeftConnections finds them idle.
// Connections in a network namespace that no task is in are not found, and
// keep the earlier rules. Call it after the services are restored; without
// an earlier data plane it does nothing.
func (d *Datapath) HandOverConnections() (model.HandOver, error) {
	return d.tcp.handOverPrevious(handOverPasses)
}

// ReleaseLeftConnections gives the connections HandOverConnections left in
// the earlier data plane back to their applications, those idle by now, in
// one pass: they pass everything anyway, and they keep that data plane
// alive, its rules included (gigabytes with a million rules), until the
// last of them leaves. Got.Left is how many are still there; with none,
// later calls do nothing.
func (d *Datapath) ReleaseLeftConnections() (model.HandOver, error) {
	return d.tcp.handOverPrevious(1)
}

// handOverPrevious runs the handover from the earlier data plane, and lets
// go of it once no connection is left there.
func (t *tcpPlane) handOverPrevious(passes int) (model.HandOver, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.prev == nil {
		return model.HandOver{}, nil
	}
	got, err := t.handOver(t.prev, 0, passes)
	if err != nil || got.Left == 0 {
		t.prev.Close()
		t.prev = nil
	}
	return got, err
}

// releaseConnections takes an unregistered listener's idle connections out
// of the sockhash, where they would keep a place and pass every segment
// through the verdict; busy ones stay, passing. One pass, not retried, as
// it holds up every other change. Called with t.mu held.
func (t *tcpPlane) releaseConnections(listener uint64) (model.HandOver, error) {
	own := &connMaps{connections: t.objs.Connections, sockets: t.objs.TcpConns, own: true}
	return t.handOver(own, listener, 1)
}

// handOver runs santa_tcp_handover from the connection maps from (only on
// the connections of listener, unless 0) in every network namespace, up
// to passes times while connections are busy; the last pass leaves them.
func (t *tcpPlane) handOver(from *connMaps, listener uint64, passes int) (model.HandOver, error) {
	var got model.HandOver
	spaces, err := netns.All()
	if err != nil {
		return got, err
	}
	defer func() {
		for _, f := range spaces {
			f.Close()
		}
	}()
	last, err := t.attachHandOver(from, listener, true)
	if err != nil {
		return got, err
	}
	defer last.Close()
	retry := last
	if passes > 1 {
		if retry, err = t.attachHandOver(from, listener, false); err != nil {
			return got, err
		}
		defer retry.Close()
	}
	for pass := 1; ; pass++ {
		it := retry
		if pass == passes {
			it = last
		}
		counts, err := handOverPass(it, spaces)
		if err != nil {
			return got, err
		}
		got.Moved += counts[santaHandoverSantaHandoverResultSANTA_HANDOVER_MOVED]
		got.Released += counts[santaHandoverSantaHandoverResultSANTA_HANDOVER_RELEASED]
		got.Left += counts[santaHandoverSantaHandoverResultSANTA_HANDOVER_LEFT]
		if it == last || counts[santaHandoverSantaHandoverResultSANTA_HANDOVER_BUSY] == 0 {
			return got, nil
		}
		time.Sleep(handOverRetry)
	}
}

// handOverPass runs the handover iterator once over every TCP socket of
// each network namespace, and counts its results.
func handOverPass(it *link.Iter, spaces []*os.File) (map[santaHandoverSantaHandoverResult]int, error) {
	counts := make(map[santaHandoverSantaHandoverResult]int)
	for _, ns := range spaces {
		// The iterator walks the sockets of the namespace it is opened in.
		err := netns.In(ns, func() error {
			rd, err := it.Open()
			if err != nil {
				return err
			}
			defer rd.Close()
			results, err := io.ReadAll(rd)
			for _, r := range results {
				counts[santaHandoverSantaHandoverResult(r)]++
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("handing over connections in %s: %w", ns.Name(), err)
		}
	}
	return counts, nil
}

// attachHandOver makes a TCP iterator that runs santa_tcp_handover from
// the connection maps from (on listener's connections, unless 0) into this
// data plane's; with giveUp, busy connections are left passing.
func (t *tcpPlane) attachHandOver(from *connMaps, listener uint64, giveUp bool) (*link.Iter, error) {
	prog, err := t.loadHandOver(from, listener, giveUp)
	if err != nil {
		return nil, err
	}
	// The link holds the program.
	defer prog.Close()
	it, err := link.AttachIter(link.IterOptions{Program: prog})
	if err != nil {
		return nil, fmt.Errorf("attaching the TCP iterator: %w", err)
	}
	return it, nil
}

func (t *tcpPlane) loadHandOver(from *connMaps, listener uint64, giveUp bool) (*ebpf.Program, error) {
	spec, err := loadSantaHandover()
	if err != nil {
		return nil, fmt.Errorf("loading the handover's BPF spec: %w", err)
	}
	if err := errors.Join(spec.Variables["santa_give_up"].Set(giveUp),
		spec.Variables["santa_only_listener"].Set(listener), spec.Variables["santa_own_maps"].Set(from.own)); err != nil {
		return nil, fmt.Errorf("setting the handover's constants: %w", err)
	}
	// An earlier santad's entries may be laid out otherwise past their
	// head, which is all the program reads of them.
	size := from.connections.ValueSize()
	if size < connHeadSize {
		return nil, fmt.Errorf("the earlier process's connection entries are %d bytes, older than the %d-byte head this handover reads",
			size, connHeadSize)
	}
	spec.Maps["prev_connections"].ValueSize = size
	maps := map[string]*ebpf.Map{
		"prev_connections": from.connections, "prev_tcp_conns": from.sockets,
		"connections": t.objs.Connections, "tcp_conns": t.objs.TcpConns, "services": t.services,
		"conn_owners": t.objs.ConnOwners,
	}
	var objs struct {
		Prog *ebpf.Program `ebpf:"santa_tcp_handover"`
	}
	if err := loadOnto(spec, &objs, maps, "santa_tcp_handover"); err != nil {
		return nil, err
	}
	return objs.Prog, nil
}
