package datapath

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/rate"
)

// Learning the hot requests (docs/architecture.md, "Learning the hot
// requests"). The UDP programs count each passed request of a learning
// service by its key, exactly (bpf/include/learn.h): a candidate's in
// learn_passes, at the slot learn_watch gives its hash (user space maps
// the array and reads it whole), any other key's in the learn_counts LRU
// hash, by window, which puts the key on the learn_samples ring when its
// count in a window reaches the threshold. Once per window the learner starts the next
// window (which renews the sample budgets), makes the samples candidates
// (watched from then on), reads the candidates' counts, and makes each
// service's hot set: its candidates by their passes per window, from
// their sample on in a key's first window with passes, smoothed in the
// windows after while it keeps passing (internal/rate). A
// candidate that has not passed for learnIdleWindows, or was counted less
// than half the threshold's times a window for learnSlowWindows, is no longer
// watched: its key is sampled again if it passes that often again.

const (
	learnWindow = time.Second
	learnBudget = 8192 // samples per CPU and window
	// The passed requests a CPU counts in a window are bounded by the
	// largest Counts a learning service asks, model.MaxLearnCounts at
	// most (its cost). Counts are scaled up by passed / counted. The
	// counted requests are what the kernel knows of the passed ones: at
	// 1M names, 50,000 a window (and 4096 samples) brought about 3,600
	// new keys a window, 100,000 (and 8192) twice as many, 200,000 (and
	// 16384) four times, at twice the worst case's cost
	// (docs/benchmarks.md (h), "The hot set in pages").
	learnMinThreshold = 2       // a key's passes in a window that bring a sample, at least
	learnMaxThreshold = 1 << 24 // and at most
	// The ring is sized for the budget of learnRingCPUs CPUs at most, with
	// keys of learnRingKey bytes: a sample takes its header and its key
	// rounded up to 8 bytes, so longer keys, or more CPUs sampling at
	// once, fill it sooner, and a sample that finds it full is lost until
	// its key reaches the threshold in another window.
	learnRingKey  = 64
	learnRingCPUs = 4
	// learnIdleWindows is how many windows without a pass a candidate
	// stays watched: an offloaded one no longer passes, and one that
	// passes again comes back with a sample.
	learnIdleWindows = 8
	// learnSlowWindows is how many windows in a row a candidate may be
	// counted less than half the threshold's times and stay watched: the
	// threshold is the load's measure of a key worth knowing, and every
	// candidate costs a read each window.
	learnSlowWindows = 4
)

// sampleHeader is the size of a learn_samples record without its key:
// a record is a santa_learn_sample cut after its key, rounded up to 8
// bytes (learn.h).
var sampleHeader = binary.Size(santaSantaLearnSample{}) - int(santaSantaLearnLayoutSANTA_LEARN_MAX_KEY)

// learnRingBytes sizes learn_samples for two windows of the budget of
// cpus CPUs (at most learnRingCPUs) with keys of learnRingKey bytes: the
// learner drains it once per window.
func learnRingBytes(cpus int) uint32 {
	need := uint32(2 * min(cpus, learnRingCPUs) * learnBudget * (sampleHeader + learnRingKey + 8)) // 8: the ring's record header
	size := uint32(unix.Getpagesize())
	for size < need {
		size <<= 1
	}
	return size
}

// learner is the user-space half of learning: the learn ids of the
// services that learn, their candidates and their last window's hot set.
// Its lock guards those and the watched keys' slots; the window's reading
// of the ring and the CPUs' counts (step) runs outside it, one step at a
// time. The store tells it of services that start and stop learning, with
// the store's lock held: the lock order is store, then learner.
type learner struct {
	objs  *santaObjects
	ring  *ringbuf.Reader
	log   *slog.Logger
	every time.Duration // the window; 0: step is called by hand (tests)

	stepMu    sync.Mutex // one step at a time; guards the fields below it
	window    uint32
	threshold uint32
	started   time.Time               // of the current window
	samples   []santaSantaLearnSample // drain's, kept for the next window

	mu      sync.Mutex
	byLearn map[uint32]*learning
	bySvc   map[model.ServiceID]uint32
	byHash  map[uint64]*candidate // every service's candidates, as watched
	slots   slots                 // of learn_passes
	lastID  uint32
	running bool
	stop    chan struct{}
	done    chan struct{}
}

// learning is one service's: the counts it asks for, its last hot set,
// and the next while a step makes it (its candidates are those of byHash
// that point to it).
type learning struct {
	service model.ServiceID
	counts  uint32 // 1 to model.MaxLearnCounts
	hot     model.HotSet
	next    []model.HotRequest
}

// candidate is a key a sample brought, watched under its hash.
type candidate struct {
	key  []byte // its hot set entries' too: never written
	of   *learning
	slot uint32  // its count's in learn_passes
	read uint64  // its count at the last read
	idle int     // windows since it last passed
	slow int     // windows in a row it passed less than half the threshold
	rate float64 // passes per window, smoothed; -1 before it passed in a read
}

func newLearner(objs *santaObjects, log *slog.Logger) (*learner, error) {
	passes, err := newSlots(objs.LearnPasses)
	if err != nil {
		return nil, err
	}
	ring, err := ringbuf.NewReader(objs.LearnSamples)
	if err != nil {
		return nil, fmt.Errorf("reading learning samples: %w", err)
	}
	l := &learner{objs: objs, ring: ring, log: log, every: learnWindow,
		threshold: learnMinThreshold, started: time.Now(), slots: passes,
		byLearn: map[uint32]*learning{}, bySvc: map[model.ServiceID]uint32{}, byHash: map[uint64]*candidate{}}
	if err := l.writeConfig(); err != nil {
		ring.Close()
		return nil, err
	}
	return l, nil
}

// writeConfig writes the window, the threshold and the counts a CPU
// makes a window: the most any learning service asks. Called without
// l.mu.
func (l *learner) writeConfig() error {
	cfg := santaSantaLearnConfig{Window: l.window, Threshold: l.threshold, Budget: learnBudget, Counts: l.counts()}
	if err := l.objs.LearnConfig.Put(uint32(0), cfg); err != nil {
		return fmt.Errorf("writing the learning configuration: %w", err)
	}
	return nil
}

// close stops the windows and the ring's reader.
func (l *learner) close() {
	l.mu.Lock()
	running := l.running
	l.running = false
	if running {
		close(l.stop)
	}
	l.mu.Unlock()
	if running {
		<-l.done
	}
	l.ring.Close()
}

// start gives service a new learn id, under which the data plane counts
// its passed requests (counts a CPU and window, from the next window on;
// 0: model.MaxLearnCounts), and starts the windows if they do not run
// yet.
func (l *learner) start(service model.ServiceID, counts uint32) uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastID++
	if l.lastID == 0 { // after 2^32 starts: 0 means off
		l.lastID++
	}
	l.byLearn[l.lastID] = &learning{service: service, counts: askedCounts(counts)}
	l.bySvc[service] = l.lastID
	if !l.running && l.every > 0 {
		l.running, l.stop, l.done = true, make(chan struct{}), make(chan struct{})
		go l.loop()
	}
	return l.lastID
}

// askedCounts is the counts a service asks for, 0 being the most.
func askedCounts(counts uint32) uint32 {
	if counts == 0 || counts > model.MaxLearnCounts {
		return model.MaxLearnCounts
	}
	return counts
}

// setCounts changes the counts a learn id asks for, from the next window
// on.
func (l *learner) setCounts(id, counts uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lr, ok := l.byLearn[id]; ok {
		lr.counts = askedCounts(counts)
	}
}

// counts is the passed requests a CPU counts a window: the most any
// learning service asks for.
func (l *learner) counts() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var most uint32
	for _, lr := range l.byLearn {
		most = max(most, lr.counts)
	}
	if most == 0 {
		return model.MaxLearnCounts
	}
	return most
}

// end forgets a learn id: its samples still on the ring are dropped.
func (l *learner) end(id uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lr, ok := l.byLearn[id]
	if !ok {
		return
	}
	delete(l.byLearn, id)
	delete(l.bySvc, lr.service)
	var gone []uint64
	for h, c := range l.byHash {
		if c.of == lr {
			gone = append(gone, h)
		}
	}
	if err := l.unwatch(gone); err != nil {
		l.log.Warn("learning: forgetting a service's keys", "err", err)
	}
}

// hot is service's last hot set: at most n of its requests, from the one
// at index from on.
func (l *learner) hot(service model.ServiceID, from, n int) (model.HotSet, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id, ok := l.bySvc[service]
	if !ok {
		return model.HotSet{}, fmt.Errorf("service %d: %w", service, model.ErrNotLearning)
	}
	h := l.byLearn[id].hot.Page(from, n)
	h.Requests = slices.Clone(h.Requests)
	return h, nil
}

func (l *learner) loop() {
	defer close(l.done)
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if err := l.step(); err != nil {
				l.log.Warn("learning window", "err", err)
			}
		}
	}
}

// active says whether any service learns.
func (l *learner) active() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byLearn) > 0
}

// step ends the window: the next one starts, the samples become
// candidates, the candidates' counts make each learning service's hot
// set, and the threshold follows the samples.
func (l *learner) step() error {
	l.stepMu.Lock()
	defer l.stepMu.Unlock()
	l.mu.Lock()
	l.slots.step()
	l.mu.Unlock()
	if !l.active() {
		l.started = time.Now()
		return nil
	}
	// Read before the next window starts: a CPU that learns in it
	// forgets this one's.
	busiest, scale, err := l.readCPUs(l.window)
	if err != nil {
		return err
	}
	l.window++
	if err := l.writeConfig(); err != nil {
		return err
	}
	now := time.Now()
	window := now.Sub(l.started)
	l.started = now
	samples, err := l.drain()
	if err != nil {
		return err
	}
	l.mu.Lock()
	err = l.merge(samples)
	if err == nil {
		err = l.readCounts(scale)
	}
	if err == nil {
		l.makeHotSets(window, scale)
	}
	l.mu.Unlock()
	if err != nil {
		return err
	}
	l.adapt(busiest)
	return l.writeConfig()
}

// drain takes every sample on the ring, into the last window's slice:
// thousands of samples of ~290 bytes a window, which a slice of its own
// each window had the heap grow and shrink by megabytes, with a page
// fault each time it grew (a third of santad's faults while it learned
// 1M names). Called with stepMu held; the samples are the caller's until
// the next call.
func (l *learner) drain() ([]santaSantaLearnSample, error) {
	out := l.samples[:0]
	defer func() { l.samples = out }()
	var rec ringbuf.Record
	l.ring.SetDeadline(time.Now())
	for {
		err := l.ring.ReadInto(&rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return out, nil
		case err != nil:
			return out, fmt.Errorf("reading learning samples: %w", err)
		}
		if s, ok := decodeSample(rec.RawSample); ok {
			out = append(out, s)
		}
	}
}

// decodeSample reads a learn_samples record: the sample's header, then at
// least its key's bytes. The record is the C struct's own bytes (host
// layout and byte order), so they are copied as they are: decoding them
// by reflection took a tenth of santad's time while it learned 1M names.
func decodeSample(raw []byte) (santaSantaLearnSample, bool) {
	var s santaSantaLearnSample
	if len(raw) < sampleHeader {
		return s, false
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&s)), unsafe.Sizeof(s)), raw)
	if int(s.Len) > min(len(s.Key), len(raw)-sampleHeader) {
		return s, false
	}
	return s, true
}

// merge makes the samples of learning services candidates, as many as
// there are free slots, and watches them. Called with l.mu held.
func (l *learner) merge(samples []santaSantaLearnSample) error {
	var added []uint64
	// forget undoes the merge: a watched key is never sampled, so any of
	// added that made it into learn_watch leaves it (one the kernel keeps
	// stays a candidate).
	forget := func() {
		for _, h := range added {
			l.dropWatched(h)
		}
	}
	for i := range samples {
		s := &samples[i]
		lr, ok := l.byLearn[s.Learn]
		if !ok {
			continue // its service stopped learning
		}
		if _, ok := l.byHash[s.Hash]; ok {
			continue
		}
		slot, ok := l.slots.take()
		if !ok {
			continue // every slot is taken, or waits
		}
		l.byHash[s.Hash] = &candidate{key: bytes.Clone(s.Key[:s.Len]), of: lr, slot: slot, rate: -1}
		added = append(added, s.Hash)
		if err := l.slots.start(slot, l.passesAfter(s)); err != nil {
			forget()
			return err
		}
	}
	if len(added) == 0 {
		return nil
	}
	at := make([]uint32, len(added))
	for i, h := range added {
		at[i] = l.byHash[h].slot
	}
	if _, err := l.objs.LearnWatch.BatchUpdate(added, at, nil); err != nil {
		forget()
		return fmt.Errorf("watching learned keys: %w", err)
	}
	return nil
}

// passesAfter is where a newly watched key's count starts: its passes
// in learn_counts after its sample s, if they are those of the window
// that just ended (or of the one that started); 0 if the table forgot it.
// Not the passes up to the sample: a key is sampled once it passed the
// threshold's times, so those would rank a rare key that had a lucky
// window as high as the threshold, above keys of the top set.
func (l *learner) passesAfter(s *santaSantaLearnSample) uint64 {
	var e santaSantaLearnEntry
	if err := l.objs.LearnCounts.Lookup(s.Hash, &e); err != nil || e.Window+1 < l.window || e.Passes < s.Passes {
		return 0
	}
	return uint64(e.Passes - s.Passes)
}

// unwatch stops counting candidates' keys and forgets them. A key the
// kernel fails to delete stays a candidate, watched, and is tried again
// when it is dropped again: forgotten, it would keep its slot and never be
// sampled again. Called with l.mu held.
func (l *learner) unwatch(hashes []uint64) error {
	if len(hashes) == 0 {
		return nil
	}
	_, err := l.objs.LearnWatch.BatchDelete(hashes, nil)
	if err == nil {
		for _, h := range hashes {
			l.forgetCandidate(h)
		}
		return nil
	}
	// The kernel stops at the first failure, and the count it returns is
	// the request's own when it failed before deleting anything (a bad
	// descriptor): each key is deleted alone.
	kept := 0
	for _, h := range hashes {
		if !l.dropWatched(h) {
			kept++
		}
	}
	if kept > 0 {
		return fmt.Errorf("unwatching %d learned keys: %w", kept, err)
	}
	return nil
}

// dropWatched deletes a candidate's key from learn_watch and forgets it,
// unless the kernel still has it. Called with l.mu held.
func (l *learner) dropWatched(h uint64) bool {
	if err := l.objs.LearnWatch.Delete(h); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return false
	}
	l.forgetCandidate(h)
	return true
}

// forgetCandidate forgets a candidate whose key learn_watch no longer has,
// and gives its slot back. Called with l.mu held.
func (l *learner) forgetCandidate(h uint64) {
	l.slots.give(l.byHash[h].slot)
	delete(l.byHash, h)
}

// readCounts reads the candidates' counts (learn_passes, whole): each
// gains its passes since the last read, times scale, in its service's hot
// set; those idle for learnIdleWindows, or slow for learnSlowWindows, are
// dropped. Called with l.mu held.
func (l *learner) readCounts(scale float64) error {
	for _, lr := range l.byLearn {
		lr.next = lr.next[:0] // makeHotSets gave it storage of its own
	}
	if err := l.slots.read(); err != nil {
		return err
	}
	var gone []uint64
	for h, c := range l.byHash {
		l.countPasses(c, l.slots.passes(c.slot), scale)
		c.idle++
		if l.slow(c, scale) {
			c.slow++
		} else {
			c.slow = 0
		}
		if c.idle > learnIdleWindows || c.slow > learnSlowWindows {
			gone = append(gone, h)
		}
	}
	return l.unwatch(gone)
}

// slow is whether a candidate that passed passed less than half the
// threshold's times in the window: the threshold counts counted passes,
// the rate all of them (scale passed per counted).
func (l *learner) slow(c *candidate, scale float64) bool {
	return c.rate >= 0 && c.rate/scale < float64(l.threshold)/2
}

// countPasses adds a candidate's passes since the last read, times scale
// (the passed requests per counted one), to its rate:
// exactly in its first window with passes, smoothed in the windows after
// while it keeps passing; and the candidate to its service's hot set if
// it passes about once a window or more. Called with l.mu held.
func (l *learner) countPasses(c *candidate, passes uint64, scale float64) {
	n := float64(passes - c.read)
	if passes < c.read {
		n = 0
	}
	if n > 0 {
		c.read = passes
		c.idle = -1 // readCounts counts this window
		n *= scale
	}
	switch {
	case n == 0:
		// Offloaded (a rule answers it) or gone: either way the hot set
		// has no use for it, and it would take the place of keys that
		// still pass.
		c.rate = -1
	case c.rate < 0: // its first window with passes
		c.rate = n
	default:
		c.rate = rate.Smooth(c.rate, n)
	}
	if r := math.Round(c.rate); r >= 1 {
		c.of.next = append(c.of.next, model.HotRequest{Passes: uint32(min(r, 1<<32-1)), Key: c.key})
	}
}

// makeHotSets makes each learning service's next hot set its hot set:
// sorted, most passes first, numbered with the window that just started,
// with the share of passes counted (1/scale). A step that failed before
// leaves the last one whole, with its number. Called with l.mu held.
func (l *learner) makeHotSets(window time.Duration, scale float64) {
	ppm := uint32(max(1, math.Round(1e6/scale))) // 0 would say every one was counted
	for _, lr := range l.byLearn {
		slices.SortFunc(lr.next, func(a, b model.HotRequest) int {
			if c := cmp.Compare(b.Passes, a.Passes); c != 0 {
				return c
			}
			return bytes.Compare(a.Key, b.Key)
		})
		lr.hot = model.HotSet{Window: window, Number: l.window, CountedPPM: ppm, Requests: lr.next}
		lr.next = make([]model.HotRequest, 0, len(lr.hot.Requests))
	}
}

// readCPUs reads the CPUs' learning in window: the most samples a CPU
// took, and the passed requests per counted one (1 when every one was
// counted).
func (l *learner) readCPUs(window uint32) (busiest uint32, scale float64, err error) {
	var per []santaSantaLearnCpu
	if err := l.objs.LearnCpu.Lookup(uint32(0), &per); err != nil {
		return 0, 0, fmt.Errorf("reading learning per CPU: %w", err)
	}
	var passed, counted uint64
	for _, c := range per {
		if c.Window == window {
			busiest = max(busiest, c.Samples)
			passed += uint64(c.Passed)
			counted += uint64(c.Counted)
		}
	}
	scale = 1
	if counted > 0 && passed > counted {
		scale = float64(passed) / float64(counted)
	}
	return busiest, scale, nil
}

// adapt doubles the threshold after a window in which a CPU spent its
// budget, and halves it after one in which every CPU took less than a
// quarter: the samples stay within the budget, and the threshold stays as
// low as the load allows, so that a key is known after few passes. A key
// a spent budget left out comes in a later window.
func (l *learner) adapt(busiest uint32) {
	switch {
	case busiest >= learnBudget:
		l.threshold = min(2*l.threshold, learnMaxThreshold)
	case busiest < learnBudget/4:
		l.threshold = max(l.threshold/2, learnMinThreshold)
	}
}
