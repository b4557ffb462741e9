package datapath

import (
	"errors"
	"log/slog"
	"os"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/localaddr"
)

// localAddrs keeps the data plane's local_addrs map equal to the kernel's
// local routing table (deliver.h answers only packets to the host's own
// addresses), from Open until Close. Between a change of the table and the
// map taking it lie the netlink notification and one dump: milliseconds.
type localAddrs struct {
	m       *ebpf.Map
	watcher *localaddr.Watcher
	log     *slog.Logger
	done    chan struct{}
}

// followLocalAddrs fills m from the local table of the calling thread's
// network namespace and keeps it in sync until stop, from whichever thread
// its goroutine runs on. Only a table that cannot be read fails it: what
// the map cannot hold is logged, and requests to it pass to the stack.
func followLocalAddrs(m *ebpf.Map, log *slog.Logger) (*localAddrs, error) {
	// Subscribed before the first dump: no change falls between the two.
	w, err := localaddr.Watch()
	if err != nil {
		return nil, err
	}
	l := &localAddrs{m: m, watcher: w, log: log, done: make(chan struct{})}
	if err := l.sync(); err != nil {
		w.Close()
		return nil, err
	}
	go l.loop()
	return l, nil
}

func (l *localAddrs) loop() {
	defer close(l.done)
	for {
		if err := l.watcher.Wait(); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				l.log.Error("following the host's addresses stopped; the data plane keeps the last ones it read", "err", err)
			}
			return
		}
		if err := l.sync(); err != nil {
			l.log.Error("reading the host's addresses; the data plane keeps the last ones it read", "err", err)
		}
	}
}

// sync makes the map the current table: the stale entries go first, which
// makes room for the new ones and never touches an address that stays.
// It fails only if the table cannot be read.
func (l *localAddrs) sync() error {
	table, ranges, err := l.watcher.Read()
	if err != nil {
		return err
	}
	want := make(map[santaSantaAddrKey]santaSantaAddrKind, len(table))
	for k, kind := range table {
		want[addrKey(k)] = addrKinds[kind]
	}
	var k santaSantaAddrKey
	var v santaSantaAddrKind
	var stale []santaSantaAddrKey
	for it := l.m.Iterate(); it.Next(&k, &v); {
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	for _, k := range stale {
		if err := l.m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			l.log.Error("removing a former local address from the data plane", "err", err)
		}
	}
	failed := 0
	for k, kind := range want {
		if err := l.m.Put(k, kind); err != nil {
			failed++
		}
	}
	if failed > 0 {
		l.log.Error("the data plane holds only some of the host's addresses; requests to the others pass to the stack",
			"addresses", len(want), "not_held", failed, "capacity", l.m.MaxEntries())
	}
	if ranges > 0 {
		l.log.Debug("local routes wider than one address are not answered in the kernel", "routes", ranges)
	}
	return nil
}

// stop ends the sync; the map keeps what it has.
func (l *localAddrs) stop() {
	l.watcher.Close()
	<-l.done
}

var addrKinds = map[localaddr.Kind]santaSantaAddrKind{
	localaddr.Local:     santaSantaAddrKindSANTA_ADDR_LOCAL,
	localaddr.Broadcast: santaSantaAddrKindSANTA_ADDR_BROADCAST,
}

func addrKey(k localaddr.Key) santaSantaAddrKey {
	key := santaSantaAddrKey{Ifindex: k.Ifindex}
	if k.Addr.Is4() {
		key.Family = 4
		a := k.Addr.As4()
		copy(key.Addr[:], a[:])
	} else {
		key.Family = 6
		a := k.Addr.As16()
		copy(key.Addr[:], a[:])
	}
	return key
}
