package datapath

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/santa-offload/santa/internal/netns"
)

// Handing over TCP connections (docs/tcp.md, "Restarts"). The connections an
// earlier process's data plane served stay in its sockhash, which they keep
// alive, and run its programs with its rules for as long as they live. A
// new process takes them into its own data plane, or gives them back to
// their applications, with santa_tcp_handover (bpf/santa_handover.bpf.c).

// HandOver says what HandOverConnections did with an earlier process's
// connections.
type HandOver struct {
	Moved    int // now served by this data plane, with their state
	Released int // the applications' alone: their listener is not registered here, or they were passing
	Left     int // never idle: they stay in the earlier data plane and pass everything
}

// Between passes over busy connections (a bounced request waiting for its
// reply, passed data not read yet), and how many passes before giving up.
const (
	handOverRetry  = 20 * time.Millisecond
	handOverPasses = 10
)

// previousTCP is an earlier process's connection state, held from before
// its pins are replaced until HandOverConnections.
type previousTCP struct {
	connections, sockets *ebpf.Map
}

func (p *previousTCP) Close() error {
	return errors.Join(p.connections.Close(), p.sockets.Close())
}

// keepPreviousTCP holds on to the connection maps pinned in dir, if any.
func (d *Datapath) keepPreviousTCP(dir string) {
	conns, err := ebpf.LoadPinnedMap(filepath.Join(dir, "connections"), nil)
	if err != nil {
		return // nothing to hand over
	}
	sockets, err := ebpf.LoadPinnedMap(filepath.Join(dir, "tcp_conns"), nil)
	if err != nil {
		conns.Close()
		return
	}
	d.prevTCP = &previousTCP{connections: conns, sockets: sockets}
}

// HandOverConnections takes the connections of the data plane an earlier
// process pinned at this one's pin path into this one: each idle one whose
// listener is registered here (RestoreService) moves with its state, the
// others are released to their applications. Busy connections are tried
// again for a while; those still busy then stay in the earlier data plane,
// passing everything. Connections in a network namespace that no task is
// in are not found, and keep the earlier rules. Call it after the services
// are restored; without an earlier data plane it does nothing.
func (d *Datapath) HandOverConnections() (HandOver, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var got HandOver
	if d.prevTCP == nil {
		return got, nil
	}
	defer func() {
		d.prevTCP.Close()
		d.prevTCP = nil
	}()
	spaces, err := netns.All()
	if err != nil {
		return got, err
	}
	defer func() {
		for _, f := range spaces {
			f.Close()
		}
	}()
	retry, err := d.attachHandOver(false)
	if err != nil {
		return got, err
	}
	defer retry.Close()
	last, err := d.attachHandOver(true)
	if err != nil {
		return got, err
	}
	defer last.Close()
	for pass := 1; ; pass++ {
		it := retry
		if pass == handOverPasses {
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

// attachHandOver makes a TCP iterator that runs santa_tcp_handover on the
// earlier process's connection maps and this one's; with giveUp, busy
// connections are left passing.
func (d *Datapath) attachHandOver(giveUp bool) (*link.Iter, error) {
	prog, err := d.loadHandOver(giveUp)
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

// loadHandOver loads santa_tcp_handover onto the earlier process's
// connection maps and this one's.
func (d *Datapath) loadHandOver(giveUp bool) (*ebpf.Program, error) {
	spec, err := loadSantaHandover()
	if err != nil {
		return nil, fmt.Errorf("loading the handover's BPF spec: %w", err)
	}
	if err := spec.Variables["santa_give_up"].Set(giveUp); err != nil {
		return nil, fmt.Errorf("setting santa_give_up: %w", err)
	}
	maps := map[string]*ebpf.Map{
		"prev_connections": d.prevTCP.connections, "prev_tcp_conns": d.prevTCP.sockets,
		"connections": d.objs.Connections, "tcp_conns": d.tcp.TcpConns, "services": d.objs.Services,
	}
	var objs struct {
		Prog *ebpf.Program `ebpf:"santa_tcp_handover"`
	}
	if err := loadOnto(spec, &objs, maps, "santa_tcp_handover"); err != nil {
		return nil, err
	}
	return objs.Prog, nil
}
