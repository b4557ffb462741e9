package datapath

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// Rule bodies of every UDP class are answered from the first chunk, the
// last slot of a full chunk and the first of the next; a deleted rule's
// slot, written again by a new rule, answers with the new rule only.
func TestRuleBodiesAcrossChunks(t *testing.T) {
	d := openTest(t)
	c := boundUDP(t, "127.0.0.1:0")
	svc := register(t, d, c)
	to := local(c)
	classRule := func(class string, i, n int) rule.Rule {
		key := fmt.Sprintf("%s-%05d", class, i) // fixed width: no key is a prefix of another
		body := bytes.Repeat([]byte(key+"/"), n/(len(key)+1)+1)[:n]
		return rule.Rule{Condition: rule.Condition{Pattern: []byte(key)},
			Processors: []rule.Processor{rule.Put(0, body)}, ReplyLen: uint16(n)}
	}
	answers := func(t *testing.T, r rule.Rule) {
		t.Helper()
		req := request(to, r.Condition.Pattern)
		verdict, out := run(t, d.XDPProgram(), req.Bytes())
		want := req.Reply(expectReply(r, r.Condition.Pattern)).Bytes()
		if verdict != xdpTX || !bytes.Equal(out[:len(want)], want) {
			t.Fatalf("%s: verdict %d, reply\n got %q\nwant %q", r.Condition.Pattern, verdict, out[:len(want)], want)
		}
	}

	for _, class := range []struct {
		name  string
		reply int
		chunk int // bodies per chunk: santa_abi.h's shifts
	}{{"small", 100, 1 << 12}, {"medium", 600, 1 << 11}, {"large", rule.MaxUDPReply, 1 << 10}} {
		t.Run(class.name, func(t *testing.T) {
			// Slot numbers start at 1: chunk 0 is full at chunk-1 rules.
			n := class.chunk + 1
			rs := make([]rule.Rule, n)
			for i := range rs {
				rs[i] = classRule(class.name, i, class.reply)
			}
			ids, err := d.AddRules(svc, rs)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{0, class.chunk - 2, class.chunk - 1, n - 1} {
				answers(t, rs[i])
			}
			// The last rule's slot is reused once the reclaimer has freed it.
			last := d.slotOf(ids[n-1])
			if err := d.DeleteRule(ids[n-1]); err != nil {
				t.Fatal(err)
			}
			if !eventually(5*time.Second, 10*time.Millisecond, func() bool {
				d.store.mu.Lock()
				defer d.store.mu.Unlock()
				return slices.Contains(d.store.slots[slotClass(last)].free, slotNumber(last))
			}) {
				t.Fatalf("slot %#x not freed", last)
			}
			again := classRule(class.name, n, class.reply)
			id, err := d.AddRule(svc, again)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.slotOf(id); got != last {
				t.Fatalf("new rule in slot %#x, want the freed %#x", got, last)
			}
			answers(t, again)
			req := request(to, rs[n-1].Condition.Pattern)
			if verdict, _ := run(t, d.XDPProgram(), req.Bytes()); verdict == xdpTX {
				t.Errorf("the deleted rule still answers")
			}
		})
	}
}

func (d *Datapath) slotOf(id model.RuleID) uint32 {
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	return d.store.rules[id].slot
}
