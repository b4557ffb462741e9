package datapath

import (
	"bytes"
	"testing"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// holdReclaimer stops the reclaimer from waking until the test ends, so
// that what a change retires stays in the index as long as a slow grace
// period could leave it: wake-ups go to a channel swapped in, not to the
// one reclaimLoop was started with.
func holdReclaimer(t *testing.T, d *Datapath) {
	st := d.store
	st.mu.Lock()
	kick := st.kick
	st.kick = make(chan struct{}, 1)
	st.mu.Unlock()
	t.Cleanup(func() {
		st.mu.Lock()
		st.kick = kick
		st.mu.Unlock()
		st.wakeReclaimer()
	})
}

// An index node a change leaves unreachable waits for a grace period
// before it is deleted; a later change that makes its level walked again
// must not let packets find it. Here the node holds the old version of a
// replaced rule, whose slot also waits: found, it would answer the old
// reply over the new one.
func TestRetiredNodeNotFoundAgain(t *testing.T) {
	d := openTest(t)
	c := boundUDP(t, "127.0.0.1:0")
	svc := register(t, d, c)
	to := local(c)
	holdReclaimer(t, d)

	put := func(pattern, reply string) rule.Rule {
		return rule.Rule{Condition: rule.Condition{Pattern: []byte(pattern)},
			Processors: []rule.Processor{rule.Put(0, []byte(reply))}, ReplyLen: uint16(len(reply))}
	}
	add := func(r rule.Rule) model.RuleID {
		t.Helper()
		id, err := d.AddRule(svc, r)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	add(put("zzzz", "region")) // the region: 4 bytes at offset 0
	// Five rules below the root "aaaa": it keeps four, so all five move to
	// nodes at the next level, one of them holding "aaaa1111".
	old := add(put("aaaa1111", "old"))
	var last model.RuleID
	for _, p := range []string{"aaaa2222", "aaaa3333", "aaaa4444", "aaaa5555"} {
		last = add(put(p, p))
	}
	// Four left: the root holds them all and nothing walks that level, so
	// its nodes are retired, not deleted.
	if err := d.DeleteRule(last); err != nil {
		t.Fatal(err)
	}
	newer := put("aaaa111", "new")
	if err := d.ReplaceRules([]model.RuleUpdate{{ID: old, Rule: newer}}); err != nil {
		t.Fatal(err)
	}
	// Five again: the root points to that level once more, where the
	// retired "aaaa1111" node still lies with the old rule's slot.
	add(put("aaaa6666", "aaaa6666"))

	req := request(to, []byte("aaaa1111"))
	verdict, out := run(t, d.XDPProgram(), req.Bytes())
	if want := req.Reply(expectReply(newer, []byte("aaaa1111"))).Bytes(); verdict != xdpTX || !bytes.Equal(out, want) {
		t.Fatalf("verdict %d, reply %q; want the new rule's %q", verdict, out, want)
	}
}
