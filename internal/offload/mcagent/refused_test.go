package mcagent

import (
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
)

// refusingConn is a connection to the fake santad whose AddGuardedRules
// and transactions' ReplaceRules can be refused as a real santad refuses
// them: ENOSPC (the host's rule capacity, no index) or EDQUOT of a
// replace that grows the uid's bytes (no index either).
type refusingConn struct {
	*fakeConn
	refuseAdd     int // refuse this many AddGuardedRules calls
	refuseReplace func(e client.RuleEntry) bool
}

func (c *refusingConn) AddGuardedRules(id uint32, rs []client.GuardedRule) ([]uint32, error) {
	if c.refuseAdd > 0 {
		c.refuseAdd--
		return nil, refuse(syscall.ENOSPC, "capacity exhausted")
	}
	return c.fakeConn.AddGuardedRules(id, rs)
}

func (c *refusingConn) Begin(id uint32) (Txn, error) {
	t, err := c.fakeConn.Begin(id)
	if err != nil {
		return nil, err
	}
	return &refusingTxn{Txn: t, c: c}, nil
}

type refusingTxn struct {
	Txn
	c *refusingConn
}

func (t *refusingTxn) ReplaceRules(u []client.RuleEntry) error {
	for _, e := range u {
		if t.c.refuseReplace != nil && t.c.refuseReplace(e) {
			return refuse(syscall.EDQUOT, "quota of N bytes for uid 1000 exceeded")
		}
	}
	return t.Txn.ReplaceRules(u)
}

// newRefusingRig is a rig whose connections are refusingConns: the last
// one is *rc.
func newRefusingRig(t *testing.T) (r *rig, rc **refusingConn) {
	var last *refusingConn
	r = newRig(t, nil)
	cfg := r.a.cfg
	cfg.Dial = func() (Santad, error) {
		r.conn = r.d.conn()
		last = &refusingConn{fakeConn: r.conn}
		return last, nil
	}
	a := newAgent(cfg, r.finder, take, r.mc, r.mc)
	a.now = func() time.Time { return r.clock }
	r.a = a
	return r, &last
}

// Keys of an ADD_RULES refused as a whole (ENOSPC: the host's rule
// capacity, for a moment; ESTALE) are not kept as offloaded without a
// rule: hot, they are learned again and get one.
func TestAddRefusedWholeLearnedAgain(t *testing.T) {
	r, rc := newRefusingRig(t)
	r.scan()
	_, udp := r.services()
	r.mc.set("k", "v", -1)
	(*rc).refuseAdd = 1 // the host's capacity is full for this one add
	r.d.setHot(udp, map[string]uint32{get("k"): 100})
	r.window(time.Second)
	if s := r.a.snapshot(); s.installed != 0 {
		t.Errorf("the refused add counted %d keys installed; want 0", s.installed)
	}
	// Capacity is back; k stays hot (its gets pass: it has no rule).
	tcpBefore := r.mc.tcp
	for range 10 {
		r.window(time.Second)
	}
	if _, ok := r.d.rules(udp)["k"]; !ok {
		t.Errorf("k, hot for 10 windows after one refused add, has no rule; the agent has it as offloaded: %v; "+
			"it was read %d times since", r.a.keys[get("k")] != nil, r.mc.tcp-tcpBefore)
	}
	if s := r.a.snapshot(); s.installed != 1 {
		t.Errorf("%d keys counted installed; want 1, k's second add", s.installed)
	}
}

// A REPLACE_RULES refused (EDQUOT of bytes: another key's value grew;
// ENOSPC) aborts the whole transaction, whose keys' rules stay at their
// old, dead generation: the keys are learned again, not kept as if their
// rules had the new one (read again and "confirmed" every other window,
// their gets all passing until the next write).
func TestReplaceRefusedLearnedAgain(t *testing.T) {
	r, rc := newRefusingRig(t)
	r.scan()
	_, udp := r.services()
	r.offload(udp, "k1", "k2")
	(*rc).refuseReplace = func(e client.RuleEntry) bool { return string(e.Guard.Key) == "k2" }
	r.mc.set("k1", "new1", -1)
	r.mc.set("k2", "new2-much-longer-value", -1)
	r.d.setGen("k1", r.gen(3))
	r.d.setGen("k2", r.gen(3))
	r.watch(50 * time.Millisecond) // both read again; the transaction refused
	(*rc).refuseReplace = nil      // santad takes everything again
	// Both rules dead: their gets pass, every window.
	r.d.setHot(udp, map[string]uint32{get("k1"): 1000, get("k2"): 1000})
	tcpBefore := r.mc.tcp
	for range 20 {
		r.window(time.Second)
		r.watch(50 * time.Millisecond)
	}
	s := r.a.snapshot()
	if s.refreshed != 0 {
		t.Errorf("the refused replace counted %d rules refreshed; want 0", s.refreshed)
	}
	if g := r.d.rules(udp)["k1"].Guard.Gen; g != 3 {
		t.Errorf("k1's rule is at gen %d (dead: k1 is at gen 3) 20 windows after one refused replace, its gets passing; "+
			"the agent has its gen as %d; %d items read meanwhile, %d confirmed", g, r.a.keys[get("k1")].gen.Gen,
			r.mc.tcp-tcpBefore, s.confirmed)
	}
}
