package mcrig

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/mccheck"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// Order is the order an installer reads a key's generation and its value
// in.
type Order int

const (
	// GenerationFirst is the agent's protocol: the generation, then the
	// value. A rule built so is never stale.
	GenerationFirst Order = iota
	// ValueFirst is wrong: a write between the two reads leaves a rule
	// with the old value and the new generation. The checker must catch
	// it.
	ValueFirst
)

// InstallStats is what installers did.
type InstallStats struct {
	Installed, Replaced, Deleted int64
	Misses                       int64 // rules answering a miss (END)
	InFlight                     int64 // installs skipped: a write in flight, or a dead domain
	Timeouts                     int64 // probes memcached did not answer in time
}

func (s InstallStats) String() string {
	return fmt.Sprintf("installed %d (replacing %d, answering a miss %d), deleted %d, skipped in flight %d, probe timeouts %d",
		s.Installed, s.Replaced, s.Misses, s.Deleted, s.InFlight, s.Timeouts)
}

// probeTimeout bounds a probe's wait for memcached.
const probeTimeout = time.Second

// Installers runs n installers until ctx is done, each over its share of
// cfg's keys, each with its own connection to santad and its own probe
// port: in a loop, a random key of its share gets a guarded rule that
// answers a UDP get of it with memcached's reply (a value or a miss), or
// loses its rule (one time in eight). The function returned waits for
// them and returns what they did and their errors.
func (r *Rig) Installers(ctx context.Context, cfg mccheck.Config, n int, order Order) (func() (InstallStats, error), error) {
	var (
		wg    sync.WaitGroup
		stats installCounts
		mu    sync.Mutex
		errs  []error
	)
	for i := range n {
		in, err := r.newInstaller(i, order, &stats)
		if err != nil {
			return nil, err
		}
		for k := i; k < cfg.Keys; k += n {
			in.keys = append(in.keys, cfg.Key(k))
		}
		wg.Go(func() {
			defer in.close()
			if err := in.run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("installer %d: %w", i, err))
				mu.Unlock()
			}
		})
	}
	return func() (InstallStats, error) {
		wg.Wait()
		return stats.load(), errors.Join(errs...)
	}, nil
}

type installCounts struct {
	installed, replaced, deleted, misses, inFlight, timeouts atomic.Int64
}

func (c *installCounts) load() InstallStats {
	return InstallStats{Installed: c.installed.Load(), Replaced: c.replaced.Load(), Deleted: c.deleted.Load(),
		Misses: c.misses.Load(), InFlight: c.inFlight.Load(), Timeouts: c.timeouts.Load()}
}

// installer is one of them.
type installer struct {
	r      *Rig
	c      *client.Client
	probe  *net.UDPConn
	rng    *rand.Rand
	order  Order
	keys   []string
	ids    map[string]uint32 // its rule of each key
	counts *installCounts
	reqID  uint16
}

func (r *Rig) newInstaller(i int, order Order, counts *installCounts) (*installer, error) {
	in := &installer{r: r, rng: rand.New(rand.NewPCG(uint64(i), 7)), order: order, ids: map[string]uint32{}, counts: counts}
	var err error
	if in.c, err = client.Dial(r.Santad.Socket); err != nil {
		return nil, err
	}
	if err := r.NS.Do(func() (err error) {
		in.probe, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(Addr))
		return err
	}); err != nil {
		in.c.Close()
		return nil, err
	}
	// Its probes are never answered by a rule (santad's probe port).
	port := uint16(in.probe.LocalAddr().(*net.UDPAddr).Port)
	if err := in.c.SetLearning(r.UDP, client.Learning{KeyOffset: 8, ProbePort: port, Enabled: true}); err != nil {
		in.close()
		return nil, err
	}
	return in, nil
}

func (in *installer) close() {
	in.probe.Close()
	in.c.Close()
}

func (in *installer) run(ctx context.Context) error {
	for ctx.Err() == nil {
		key := in.keys[in.rng.IntN(len(in.keys))]
		if id, ok := in.ids[key]; ok && in.rng.IntN(8) == 0 {
			if err := in.c.DeleteRules(in.r.UDP, []uint32{id}); err != nil {
				return err
			}
			delete(in.ids, key)
			in.counts.deleted.Add(1)
			continue
		}
		if err := in.install(key); err != nil {
			return err
		}
	}
	return nil
}

// install reads key's generation and its value from memcached (in the
// installer's order), then installs or replaces the rule answering a get
// of it with that value, guarded at that generation.
func (in *installer) install(key string) error {
	var g client.Generation
	var err error
	if in.order == GenerationFirst {
		if g, err = in.c.Generation(in.r.UDP, []byte(key)); err != nil {
			return err
		}
	}
	in.reqID++
	frame := []byte{byte(in.reqID >> 8), byte(in.reqID), 0, 0, 0, 1, 0, 0}
	got, err := santadtest.Ask(in.probe, append(frame, "get "+key+"\r\n"...), probeTimeout)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		in.counts.timeouts.Add(1)
		return nil
	}
	if err != nil {
		return err
	}
	if len(got) < 8 || string(got[:8]) != string(frame) {
		return nil // a late reply to an earlier probe
	}
	if in.order == ValueFirst {
		if g, err = in.c.Generation(in.r.UDP, []byte(key)); err != nil {
			return err
		}
	}
	if g.InFlight || g.Epoch == 0 {
		in.counts.inFlight.Add(1)
		return nil
	}
	value := got[8:]
	if string(value) == "END\r\n" {
		in.counts.misses.Add(1)
	}
	request := "get " + key + "\r\n"
	rl := rule.Rule{
		Condition:  rule.ExactLength(rule.Condition{Offset: 8, Pattern: []byte(request)}, uint16(8+len(request))),
		Processors: []rule.Processor{rule.Copy(0, 2, 0), rule.Put(2, []byte{0, 0, 0, 1, 0, 0}), rule.Put(8, value)},
		ReplyLen:   uint16(8 + len(value)),
	}
	guard := g.Guard([]byte(key), 0)
	if id, ok := in.ids[key]; ok {
		if err := in.c.ReplaceRules(in.r.UDP, []client.RuleEntry{{RuleID: id, Rule: rl, Guard: guard}}); err != nil {
			return err
		}
		in.counts.replaced.Add(1)
	} else {
		ids, err := in.c.AddGuardedRules(in.r.UDP, []client.GuardedRule{{Rule: rl, Guard: guard}})
		if err != nil {
			return err
		}
		in.ids[key] = ids[0]
	}
	in.counts.installed.Add(1)
	return nil
}
