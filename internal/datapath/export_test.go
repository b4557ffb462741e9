package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// What only this package's tests use of the data path: single-rule
// shorthands for Apply, the installed rules and the TC program.

// ReplaceRule replaces one rule; readers see the old rule or the new one.
func (d *Datapath) ReplaceRule(id model.RuleID, r rule.Rule) error {
	return d.ReplaceRules([]model.RuleUpdate{{ID: id, Rule: r}})
}

// ReplaceRules replaces rules of one service, all or none.
func (d *Datapath) ReplaceRules(updates []model.RuleUpdate) error {
	if len(updates) == 0 {
		return errors.New("empty batch")
	}
	svc, err := d.store.serviceOf(updates[0].ID)
	if err != nil {
		return err
	}
	b := model.Batch{Replace: updates}
	if err := d.compile(svc, &b); err != nil {
		return err
	}
	_, err = d.Apply(svc, b)
	return err
}

// DeleteRule deletes one rule.
func (d *Datapath) DeleteRule(id model.RuleID) error { return d.DeleteRules([]model.RuleID{id}) }

// Rules lists a service's rules.
func (d *Datapath) Rules(id model.ServiceID) (map[model.RuleID]rule.Rule, error) {
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	svc, ok := d.store.services[id]
	if !ok {
		return nil, fmt.Errorf("service %d: %w", id, model.ErrUnknownService)
	}
	out := make(map[model.RuleID]rule.Rule, len(svc.rules))
	for id, r := range svc.rules {
		out[id] = r.rule
	}
	return out, nil
}

// TCProgram is the TC ingress program, for BPF_PROG_TEST_RUN.
func (d *Datapath) TCProgram() *ebpf.Program { return d.objs.SantaUdpTc }

// learnByHand stops d's learning windows from running on their own: the
// test ends each with learnStep.
func (d *Datapath) learnByHand() { d.store.learn.every = 0 }

// learnStep ends the learning window now.
func (d *Datapath) learnStep() error { return d.store.learn.step() }

// learnConfig sets the data plane's learning threshold and budget, in
// window 0.
func (d *Datapath) learnConfig(threshold, budget uint32) error {
	return d.objs.LearnConfig.Put(uint32(0), santaSantaLearnConfig{Threshold: threshold, Budget: budget, Counts: model.MaxLearnCounts})
}

// learnRecords takes the raw records on the samples' ring.
func (d *Datapath) learnRecords() ([][]byte, error) {
	var out [][]byte
	var rec ringbuf.Record
	ring := d.store.learn.ring
	ring.SetDeadline(time.Now())
	for {
		err := ring.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, bytes.Clone(rec.RawSample))
	}
}

// learnSamples takes the samples on the ring.
func (d *Datapath) learnSamples() ([]santaSantaLearnSample, error) { return d.store.learn.drain() }

// learnCounts is every key's count in learn_counts and (watched)
// learn_passes, by its hash.
func (d *Datapath) learnCounts() (map[uint64]uint64, error) {
	out := map[uint64]uint64{}
	var h, n uint64
	var e santaSantaLearnEntry
	it := d.objs.LearnCounts.Iterate()
	for it.Next(&h, &e) {
		out[h] += uint64(e.Passes)
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	var slot uint32
	it = d.objs.LearnWatch.Iterate()
	for it.Next(&h, &slot) {
		if err := d.objs.LearnPasses.Lookup(slot, &n); err != nil {
			return nil, err
		}
		out[h] += n
	}
	return out, it.Err()
}

// learnID is the id service id learns under, 0 if it does not.
func (d *Datapath) learnID(id model.ServiceID) uint32 {
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	return d.store.services[id].learnID
}
