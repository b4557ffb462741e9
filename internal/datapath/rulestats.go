package datapath

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// RuleStats reads a rule's counters.
func (d *Datapath) RuleStats(id model.RuleID) (model.RuleStats, error) {
	var st model.RuleStats
	found := false
	err := d.EachRuleStats([]model.RuleID{id}, func(_ model.RuleID, s model.RuleStats) { st, found = s, true })
	if err == nil && !found {
		err = fmt.Errorf("rule %d: %w", id, model.ErrUnknownRule)
	}
	return st, err
}

// maxBatchSpan bounds the ids one batch read covers, and so its buffers
// (16 bytes per id and CPU).
const maxBatchSpan = 16384

// statsBuffers are EachRuleStats' buffers, kept from one call to the
// next: an agent reads every rule's counters every few seconds, and
// buffers of their own each time (megabytes at 100,000 rules, with the
// reply's) grew santad's heap by as much, a page fault for each page it
// grew by and a collection after, on the server's core
// (docs/benchmarks.md (h), "santad's garbage"). They hold at most
// maxBatchSpan ids' counters.
type statsBuffers struct {
	mu     sync.Mutex // held through a whole EachRuleStats
	keys   []uint32
	values []santaSantaRuleStats
}

// EachRuleStats reads the counters of ids, in rising order, and calls out
// for each rule still installed. A run of ids whose span is at most twice
// its length is read in one system call (BPF_MAP_LOOKUP_BATCH over that
// range of the counters' array): an agent reads the counters of 100,000
// rules every second, and one lookup per rule made that a tenth of the
// server core (docs/benchmarks.md (j)). Calls run one at a time; out must
// not call EachRuleStats.
func (d *Datapath) EachRuleStats(ids []model.RuleID, out func(model.RuleID, model.RuleStats)) error {
	d.stats.mu.Lock()
	defer d.stats.mu.Unlock()
	for len(ids) > 0 {
		n := denseRun(ids)
		run := ids[:n]
		ids = ids[n:]
		per, err := d.readRuleStats(uint32(run[0]), uint32(run[n-1]-run[0])+1)
		if err != nil {
			return fmt.Errorf("reading rule counters: %w", err)
		}
		ncpu := len(per) / int(run[n-1]-run[0]+1)
		for _, id := range run {
			if !d.store.hasRule(id) {
				continue // deleted since
			}
			var s model.RuleStats
			for _, c := range per[int(id-run[0])*ncpu:][:ncpu] {
				s.Hits += c.Hits
				s.Bytes += c.Bytes
			}
			out(id, s)
		}
	}
	return nil
}

// denseRun is the length of the longest prefix of ids (rising) that one
// batch read covers: a span of at most twice its length and maxBatchSpan.
func denseRun(ids []model.RuleID) int {
	n := 1
	for n < len(ids) {
		span := int(ids[n]-ids[0]) + 1
		if span > maxBatchSpan || span > 2*(n+1) && span > 64 {
			break
		}
		n++
	}
	return n
}

// readRuleStats reads count consecutive entries of the per-CPU rule
// counters from first on, CPU by CPU for each id, with one
// BPF_MAP_LOOKUP_BATCH (cilium/ebpf's batch API starts only where its
// last call ended), into d.stats: the values are the caller's until its
// next call. Called with d.stats.mu held.
func (d *Datapath) readRuleStats(first, count uint32) ([]santaSantaRuleStats, error) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	if max := d.objs.RuleStats.MaxEntries(); first >= max || count > max-first {
		return nil, fmt.Errorf("rule ids %d to %d: past the counters' %d entries", first, first+count-1, max)
	}
	keys := grow(&d.stats.keys, int(count))
	values := grow(&d.stats.values, int(count)*ncpu)
	var prev, next uint32
	attr := struct {
		inBatch, outBatch, keys, values uint64
		count, mapFD                    uint32
		elemFlags, flags                uint64
	}{
		outBatch: uint64(uintptr(unsafe.Pointer(&next))),
		keys:     uint64(uintptr(unsafe.Pointer(&keys[0]))),
		values:   uint64(uintptr(unsafe.Pointer(&values[0]))),
		count:    count,
		mapFD:    uint32(d.objs.RuleStats.FD()),
	}
	if first > 0 {
		// The batch starts after in_batch, the last key read before.
		prev = first - 1
		attr.inBatch = uint64(uintptr(unsafe.Pointer(&prev)))
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_LOOKUP_BATCH, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(keys)
	runtime.KeepAlive(values)
	runtime.KeepAlive(&prev)
	runtime.KeepAlive(&next)
	if errno != 0 && !errors.Is(errno, unix.ENOENT) {
		return nil, errno
	}
	if attr.count != count || keys[0] != first {
		return nil, fmt.Errorf("a batch read of %d counters from %d gave %d from %d", count, first, attr.count, keys[0])
	}
	return values, nil
}

// The kernel lays per-CPU values out at 8-byte strides: the counters'
// 16 bytes need no padding between CPUs.
var _ [16]byte = [unsafe.Sizeof(santaSantaRuleStats{})]byte{}

// grow makes *buf n long, reallocating it only if it is too short.
func grow[E any](buf *[]E, n int) []E {
	if cap(*buf) < n {
		*buf = make([]E, n)
	}
	*buf = (*buf)[:n]
	return *buf
}
