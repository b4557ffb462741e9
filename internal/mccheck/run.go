package mccheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santa-offload/santa/internal/netns"
)

// budget is the run's operations left, shared by its workers.
type budget struct{ left atomic.Int64 }

// take takes up to n operations and returns how many it got.
func (b *budget) take(n int) int {
	for {
		left := b.left.Load()
		if left <= 0 {
			return 0
		}
		got := min(int64(n), left)
		if b.left.CompareAndSwap(left, left-got) {
			return int(got)
		}
	}
}

// worker is what every writer and reader has.
type worker struct {
	id     int
	cfg    Config
	budget *budget
	rng    *rand.Rand
	start  time.Time
	log    *log
	seq    int // commands sent (writers)
}

func (w *worker) now() time.Duration { return time.Since(w.start) }

// pause waits Config.WritePause, or until ctx is done.
func (w *worker) pause(ctx context.Context) {
	if w.cfg.WritePause > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(w.cfg.WritePause):
		}
	}
}

func (w *worker) countWrite(form string) { w.log.forms[form]++ }

// Run runs a check as cfg says and returns what it found. An error means
// the run could not be carried out (memcached unreachable, a reply that
// cannot be read); the report then holds what was checked until then.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	r := &runner{cfg: cfg, start: time.Now(), budget: &budget{}}
	r.budget.left.Store(int64(cfg.Ops))
	defer r.close()
	if err := r.open(); err != nil {
		return Report{}, err
	}
	var before uint64
	if cfg.KernelAnswered != nil {
		var err error
		if before, err = cfg.KernelAnswered(); err != nil {
			return Report{}, fmt.Errorf("kernel-answered counter: %w", err)
		}
	}
	err := r.run(ctx)
	rep := r.report()
	if cfg.KernelAnswered != nil && err == nil {
		after, kerr := cfg.KernelAnswered()
		if kerr != nil {
			return rep, fmt.Errorf("kernel-answered counter: %w", kerr)
		}
		rep.KernelAnswered, rep.KernelKnown = after-before, true
	}
	return rep, err
}

type runner struct {
	cfg        Config
	start      time.Time
	budget     *budget
	logs       []*log
	tcpWriters []*tcpWriter
	udpWriters []*udpWriter
	tcpReaders []*tcpReader
	udpReaders []*udpReader
	conns      []net.Conn

	mu   sync.Mutex
	errs []error
}

func (r *runner) worker(id int) *worker {
	l := &log{forms: map[string]int{}}
	r.logs = append(r.logs, l)
	return &worker{id: id, cfg: r.cfg, budget: r.budget, rng: rand.New(rand.NewPCG(r.cfg.Seed, uint64(id))), start: r.start, log: l}
}

// open makes the workers and their sockets, in the clients' namespace.
// Writer w owns keys w, w+W, w+2W, ... of W writers.
func (r *runner) open() error {
	cfg := r.cfg
	writers := cfg.Writers + cfg.UDPWriters
	run := "r" + strconv.FormatInt(time.Now().UnixNano(), 36)
	kinds := cfg.Kinds
	if kinds == nil {
		kinds = AllKinds
	}
	newGen := func(w *worker) *gen {
		g := &gen{cfg: cfg, writer: w.id, run: run, rng: w.rng, kinds: kinds, state: map[int]*keyState{}}
		for k := w.id; k < cfg.Keys; k += writers {
			g.state[k] = &keyState{}
		}
		return g
	}
	owned := func(id int) []int {
		var keys []int
		for k := id; k < cfg.Keys; k += writers {
			keys = append(keys, k)
		}
		return keys
	}
	dial := func(w *worker) (tcpConn, error) {
		var c net.Conn
		err := netns.Run(cfg.netnsPath(), func() (err error) {
			c, err = net.DialTimeout("tcp", cfg.TCP.String(), ioTimeout)
			return err
		})
		if err != nil {
			return tcpConn{}, fmt.Errorf("memcached over TCP: %w", err)
		}
		r.conns = append(r.conns, c)
		return newTCPConn(c.(*net.TCPConn), w.rng, cfg.Split), nil
	}
	udp := func() (udpSock, error) {
		s := udpSock{nsPath: cfg.netnsPath(), dst: cfg.UDP}
		if err := s.open(); err != nil {
			return s, fmt.Errorf("memcached over UDP: %w", err)
		}
		return s, nil
	}
	id := 0
	for range cfg.Writers {
		w := r.worker(id)
		c, err := dial(w)
		if err != nil {
			return err
		}
		r.tcpWriters = append(r.tcpWriters, &tcpWriter{worker: w, tcpConn: c, g: newGen(w), keys: owned(id), flush: id == 0})
		id++
	}
	for range cfg.UDPWriters {
		w := r.worker(id)
		s, err := udp()
		if err != nil {
			return err
		}
		r.udpWriters = append(r.udpWriters, &udpWriter{worker: w, sock: s, g: newGen(w), keys: owned(id)})
		id++
	}
	for range cfg.TCPReaders {
		w := r.worker(id)
		c, err := dial(w)
		if err != nil {
			return err
		}
		r.tcpReaders = append(r.tcpReaders, &tcpReader{worker: w, tcpConn: c})
		id++
	}
	for range cfg.Readers {
		w := r.worker(id)
		s, err := udp()
		if err != nil {
			return err
		}
		r.udpReaders = append(r.udpReaders, &udpReader{worker: w, sock: s})
		id++
	}
	return nil
}

func (r *runner) close() {
	for _, c := range r.conns {
		c.Close()
	}
	for _, w := range r.udpWriters {
		w.sock.close()
	}
	for _, w := range r.udpReaders {
		w.sock.close()
	}
}

// run sets every key, then runs the workers until the budget or the time
// is spent, or one fails.
func (r *runner) run(ctx context.Context) error {
	var setup sync.WaitGroup
	for _, w := range r.tcpWriters {
		setup.Go(func() { r.fail(w.setup()) })
	}
	for _, w := range r.udpWriters {
		setup.Go(func() {
			for _, k := range w.keys {
				if err := w.write(w.g.set(k)); err != nil {
					r.fail(err)
					return
				}
			}
		})
	}
	setup.Wait()
	if err := r.failed(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	do := func(f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil {
				r.fail(err)
				cancel()
			}
		})
	}
	for _, w := range r.tcpWriters {
		do(w.run)
	}
	for _, w := range r.udpWriters {
		do(w.run)
	}
	for _, rd := range r.tcpReaders {
		do(rd.run)
	}
	for _, rd := range r.udpReaders {
		do(rd.run)
	}
	wg.Wait()
	return r.failed()
}

// fail and failed keep the workers' errors.
func (r *runner) fail(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *runner) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}
