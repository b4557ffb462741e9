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

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// Learning the hot requests (docs/architecture.md, "Learning the hot
// requests"). The UDP programs count each passed request of a learning
// service by its key in a per-CPU count-min sketch with two epochs
// (bpf/include/learn.h), and put a key on the learn_samples ring the first
// time its estimate on a CPU reaches the threshold. Once per window the
// learner flips the epoch, waits until no program counts in the old one,
// takes the samples as candidates, reads the old epoch's counts of every
// candidate and zeroes it. A service's hot set is its candidates by count.

const (
	learnWindow       = time.Second
	learnBudget       = 2048    // samples per CPU and epoch
	learnMinThreshold = 4       // a key's count on a CPU that brings a sample, at least
	learnMaxThreshold = 1 << 24 // and at most
	// The ring is sized for the budget of learnRingCPUs CPUs at most, with
	// keys of learnRingKey bytes: a sample takes its header and its key
	// rounded up to 8 bytes, so longer keys, or more CPUs sampling at
	// once, fill it sooner, and a sample that finds it full is lost. That
	// many samples a window are more than an agent learns anyway.
	learnRingKey  = 64
	learnRingCPUs = 4
	// maxCandidates bounds a service's candidates (keys whose counts are
	// read each window): at most this many samples are kept.
	maxCandidates = 4096
	learnWidth    = int(santaSantaLearnLayoutSANTA_LEARN_WIDTH)
	learnRows     = int(santaSantaLearnLayoutSANTA_LEARN_ROWS)
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
// Its lock guards those; the window's work on the maps (step) runs
// outside it, one step at a time. The store tells it of services that
// start and stop learning, with the store's lock held: the lock order is
// store, then learner.
type learner struct {
	objs    *santaObjects
	barrier *barrier
	ring    *ringbuf.Reader
	log     *slog.Logger
	every   time.Duration // the window; 0: step is called by hand (tests)

	stepMu    sync.Mutex // one step at a time; guards the fields below it
	epoch     uint32
	threshold uint32
	started   time.Time // of the current window
	dirty     bool      // the sketch may hold counts: one more step clears it
	rows      [][]santaSantaLearnRow

	mu      sync.Mutex
	byLearn map[uint32]*learning
	bySvc   map[model.ServiceID]uint32
	lastID  uint32
	running bool
	stop    chan struct{}
	done    chan struct{}
}

// learning is one service's: its candidates and its last hot set.
type learning struct {
	service    model.ServiceID
	candidates map[string]*candidate
	hot        model.HotSet
}

// candidate is a key a sample brought: its cells in the sketch, and
// whether it was sampled in the epoch now running (its count there is
// not read yet, so it is not dropped for a low one in the epoch before).
type candidate struct {
	cells  [2]uint32
	recent bool
}

func newLearner(objs *santaObjects, b *barrier, log *slog.Logger) (*learner, error) {
	ring, err := ringbuf.NewReader(objs.LearnSamples)
	if err != nil {
		return nil, fmt.Errorf("reading learning samples: %w", err)
	}
	l := &learner{objs: objs, barrier: b, ring: ring, log: log, every: learnWindow,
		threshold: learnMinThreshold, started: time.Now(),
		byLearn: map[uint32]*learning{}, bySvc: map[model.ServiceID]uint32{}}
	if err := l.writeConfig(); err != nil {
		ring.Close()
		return nil, err
	}
	return l, nil
}

func (l *learner) writeConfig() error {
	cfg := santaSantaLearnConfig{Epoch: l.epoch, Threshold: l.threshold, Budget: learnBudget}
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
// its passed requests, and starts the windows if they do not run yet.
func (l *learner) start(service model.ServiceID) uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastID++
	if l.lastID == 0 { // after 2^32 starts: 0 means off
		l.lastID++
	}
	l.byLearn[l.lastID] = &learning{service: service, candidates: map[string]*candidate{}}
	l.bySvc[service] = l.lastID
	if !l.running && l.every > 0 {
		l.running, l.stop, l.done = true, make(chan struct{}), make(chan struct{})
		go l.loop()
	}
	return l.lastID
}

// end forgets a learn id: its samples still on the ring are dropped.
func (l *learner) end(id uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lr, ok := l.byLearn[id]; ok {
		delete(l.byLearn, id)
		delete(l.bySvc, lr.service)
	}
}

// hot is service's last hot set, its first max requests.
func (l *learner) hot(service model.ServiceID, max int) (model.HotSet, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id, ok := l.bySvc[service]
	if !ok {
		return model.HotSet{}, fmt.Errorf("service %d: %w", service, model.ErrNotLearning)
	}
	h := l.byLearn[id].hot
	h.Requests = slices.Clone(h.Requests[:min(max, len(h.Requests))])
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

// step ends the window: the epoch flips, the samples become candidates,
// the finished epoch's counts make each learning service's hot set, and
// the threshold follows the load.
func (l *learner) step() error {
	l.stepMu.Lock()
	defer l.stepMu.Unlock()
	active := l.active()
	if !active && !l.dirty {
		l.started = time.Now()
		return nil
	}
	l.dirty = active
	finished := l.epoch
	l.epoch ^= 1
	if err := l.writeConfig(); err != nil {
		return err
	}
	// No program counts in the finished epoch after this.
	if err := l.barrier.Wait(); err != nil {
		return err
	}
	now := time.Now()
	window := now.Sub(l.started)
	l.started = now
	samples, err := l.drain()
	if err != nil {
		return err
	}
	if err := l.readEpoch(finished); err != nil {
		return err
	}
	l.mu.Lock()
	l.merge(samples)
	l.count(window)
	known := l.candidateCells()
	l.mu.Unlock()
	l.adapt(known)
	return l.writeConfig()
}

// drain takes every sample on the ring.
func (l *learner) drain() ([]santaSantaLearnSample, error) {
	var out []santaSantaLearnSample
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
// least its key's bytes.
func decodeSample(raw []byte) (santaSantaLearnSample, bool) {
	var s santaSantaLearnSample
	if len(raw) < sampleHeader {
		return s, false
	}
	full := make([]byte, binary.Size(s))
	copy(full, raw)
	if _, err := binary.Decode(full, binary.NativeEndian, &s); err != nil || int(s.Len) > min(len(s.Key), len(raw)-sampleHeader) {
		return s, false
	}
	return s, true
}

// readEpoch reads both rows of epoch into l.rows, and zeroes them and
// the epoch's sample counts.
func (l *learner) readEpoch(epoch uint32) error {
	cpus := ebpf.MustPossibleCPU()
	if l.rows == nil {
		l.rows = make([][]santaSantaLearnRow, learnRows)
	}
	zero := make([]santaSantaLearnRow, cpus)
	for r := range learnRows {
		key := epoch*uint32(learnRows) + uint32(r)
		if err := l.objs.LearnSketch.Lookup(key, &l.rows[r]); err != nil {
			return fmt.Errorf("reading the learning sketch: %w", err)
		}
		if err := l.objs.LearnSketch.Put(key, zero); err != nil {
			return fmt.Errorf("zeroing the learning sketch: %w", err)
		}
	}
	if err := l.objs.LearnEmitted.Put(epoch, make([]uint32, cpus)); err != nil {
		return fmt.Errorf("zeroing learning samples emitted: %w", err)
	}
	return nil
}

// merge makes the samples of learning services candidates. Called with
// l.mu held.
func (l *learner) merge(samples []santaSantaLearnSample) {
	for i := range samples {
		s := &samples[i]
		lr, ok := l.byLearn[s.Learn]
		if !ok {
			continue // its service stopped learning
		}
		key := string(s.Key[:s.Len])
		recent := uint32(s.Epoch) == l.epoch
		if c, ok := lr.candidates[key]; ok {
			c.recent = c.recent || recent
			continue
		}
		if len(lr.candidates) < maxCandidates {
			lr.candidates[key] = &candidate{cells: s.Cells, recent: recent}
		}
	}
}

// count makes each learning service's hot set from the finished epoch in
// l.rows, and drops the candidates that fell below the threshold. Called
// with l.mu held.
func (l *learner) count(window time.Duration) {
	for _, lr := range l.byLearn {
		hot := model.HotSet{Window: window, Requests: make([]model.HotRequest, 0, len(lr.candidates))}
		for key, c := range lr.candidates {
			n := l.estimate(c.cells)
			if n < uint64(l.threshold) && !c.recent {
				delete(lr.candidates, key)
				continue
			}
			c.recent = false
			if n > 0 {
				hot.Requests = append(hot.Requests, model.HotRequest{Passes: uint32(min(n, 1<<32-1)), Key: []byte(key)})
			}
		}
		slices.SortFunc(hot.Requests, func(a, b model.HotRequest) int {
			if c := cmp.Compare(b.Passes, a.Passes); c != 0 {
				return c
			}
			return bytes.Compare(a.Key, b.Key)
		})
		lr.hot = hot
	}
}

// estimate is a key's count: the smaller of its cells, each summed over
// the CPUs.
func (l *learner) estimate(cells [2]uint32) uint64 {
	var best uint64
	for r := range learnRows {
		var n uint64
		for _, row := range l.rows[r] {
			n += uint64(row.Cells[cells[r]%uint32(learnWidth)])
		}
		if r == 0 || n < best {
			best = n
		}
	}
	return best
}

// candidateCells are the cells of row 0 that count a candidate. Called
// with l.mu held.
func (l *learner) candidateCells() map[uint32]bool {
	cells := map[uint32]bool{}
	for _, lr := range l.byLearn {
		for _, c := range lr.candidates {
			cells[c.cells[0]%uint32(learnWidth)] = true
		}
	}
	return cells
}

// adapt sets the next window's threshold just above the sketch's noise:
// μ + 3√μ + 4, with μ the mean count of a cell of row 0 that counts no
// candidate (known), on the busiest CPU of the window that ended. A key's
// estimate is its count plus the others' in its cells: for a key not
// known yet, the tail's keys, about μ. Above that floor, most samples are
// keys at least 3√μ above the noise, few are the noise's own.
//
// The candidates are left out of μ because the agent offloads them: the
// next window's tail is what passes then. (The mean of every cell, four
// times over, set the threshold after a window in which the head still
// passed: the next one, with the head answered by rules, brought almost
// no samples.) A CPU that spends its budget has sampled the keys that
// reached the threshold first, the most frequent; the others come in the
// next windows, as rules answer the head and μ falls.
func (l *learner) adapt(known map[uint32]bool) {
	var busiest, tail uint64
	for _, row := range l.rows[0] {
		var all, rest uint64
		for c, n := range row.Cells {
			all += uint64(n)
			if !known[uint32(c)] {
				rest += uint64(n)
			}
		}
		if all >= busiest {
			busiest, tail = all, rest
		}
	}
	var mu float64
	if free := learnWidth - len(known); free > 0 {
		mu = float64(tail) / float64(free)
	}
	t := uint64(mu+3*math.Sqrt(mu)) + learnMinThreshold
	l.threshold = uint32(min(t, learnMaxThreshold))
}
