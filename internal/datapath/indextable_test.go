package datapath

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

func TestIndexPositions(t *testing.T) {
	for _, c := range []struct{ entries, want uint32 }{
		{1, 4}, {3, 16}, {4, 16}, {64, 256}, {1 << 20, 1 << 22}, {1<<29 + 1, 1 << 31}, {1<<30 - 1, 1 << 31},
	} {
		if got := indexPositions(c.entries); got != c.want {
			t.Errorf("indexPositions(%d) = %d, want %d", c.entries, got, c.want)
		}
	}
}

// keysHomeAt returns n distinct keys whose probes start at home.
func keysHomeAt(t *indexTable, home uint32, n int) []santaSantaIndexKey {
	var keys []santaSantaIndexKey
	for h := uint32(0); len(keys) < n; h++ {
		k := santaSantaIndexKey{IndexId: 1, Hash: h, End: 10}
		if indexHome(k)&t.mask() == home {
			keys = append(keys, k)
		}
	}
	return keys
}

// Keys that share a home lie one after another; a deleted one leaves a
// tombstone that the later ones are still found past, and a new key takes
// it; deleting the end of a run frees it and the tombstones before it.
func TestIndexTableProbes(t *testing.T) {
	tab := newIndexTable(16)
	const home = 14 // runs wrap around the end
	ks := keysHomeAt(tab, home, 4)
	for i, k := range ks[:3] {
		pos, err := tab.place(k)
		if want := uint32(home+i) & 15; err != nil || pos != want {
			t.Fatalf("key %d placed at %d (%v), want %d", i, pos, err, want)
		}
	}
	expectAt := func(k santaSantaIndexKey, want uint32, found bool) {
		t.Helper()
		if pos, ok := tab.find(k); ok != found || (found && pos != want) {
			t.Fatalf("find %+v = %d, %v; want %d, %v", k, pos, ok, want, found)
		}
	}
	state := func(pos uint32) uint32 { return tab.keys[pos].IndexId }

	if changed := tab.remove(15); len(changed) != 1 || state(15) != indexTomb {
		t.Fatalf("removing the middle of a run changed %v, left %#x", changed, state(15))
	}
	expectAt(ks[1], 0, false)
	expectAt(ks[2], 0, true)
	if pos, err := tab.place(ks[3]); err != nil || pos != 15 {
		t.Fatalf("a new key took %d (%v), want the tombstone at 15", pos, err)
	}
	tab.remove(15)
	if changed := tab.remove(0); len(changed) != 2 || state(0) != 0 || state(15) != 0 {
		t.Fatalf("removing the end of a run changed %v, left %#x %#x; want both free", changed, state(15), state(0))
	}
	expectAt(ks[0], 14, true)
	expectAt(ks[2], 0, false)
}

// A key whose probe finds no free position is refused, and the table is
// unchanged.
func TestIndexTableCrowded(t *testing.T) {
	tab := newIndexTable(indexProbes * 2)
	ks := keysHomeAt(tab, 3, int(indexProbes)+1)
	for _, k := range ks[:indexProbes] {
		if _, err := tab.place(k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tab.place(ks[indexProbes]); !errors.Is(err, errIndexCrowded) {
		t.Fatalf("placing past %d probes: %v, want %v", indexProbes, err, errIndexCrowded)
	}
	for _, k := range ks[:indexProbes] {
		if _, ok := tab.find(k); !ok {
			t.Fatalf("%+v lost", k)
		}
	}
}

// In a table of 64 positions (16 rules), where probes run into each other,
// the kernel answers every installed rule and no deleted one, through
// deletes and adds, and rule_index holds what user space placed.
func TestIndexTableInKernel(t *testing.T) {
	d := openTestWith(t, Options{MaxRules: 16, MaxServices: 4})
	c := boundUDP(t, "127.0.0.1:0")
	svc := register(t, d, c)
	to := local(c)
	keyRule := func(i int) rule.Rule {
		key := fmt.Sprintf("key-%03d", i)
		return rule.Rule{Condition: rule.Condition{Pattern: []byte(key)},
			Processors: []rule.Processor{rule.Put(0, []byte("reply to "+key))}, ReplyLen: 16}
	}
	answered := func(r rule.Rule) bool {
		req := request(to, r.Condition.Pattern)
		verdict, out := run(t, d.XDPProgram(), req.Bytes())
		want := req.Reply(expectReply(r, r.Condition.Pattern)).Bytes()
		return verdict == xdpTX && bytes.Equal(out[:len(want)], want)
	}
	ids := make(map[int]model.RuleID)
	add := func(from, to int) {
		for i := from; i < to; i++ {
			id, err := d.AddRule(svc, keyRule(i))
			if err != nil {
				t.Fatalf("rule %d: %v", i, err)
			}
			ids[i] = id
		}
	}
	expect := func() {
		t.Helper()
		for i := range 24 {
			if _, live := ids[i]; answered(keyRule(i)) != live {
				t.Errorf("rule %d: answered %v, installed %v", i, !live, live)
			}
		}
		d.expectIndexMirrored(t)
	}

	add(0, 16)
	expect()
	for i := 0; i < 16; i += 2 {
		if err := d.DeleteRule(ids[i]); err != nil {
			t.Fatal(err)
		}
		delete(ids, i)
	}
	expect()
	add(16, 24)
	expect()
}

// expectIndexMirrored checks, once the reclaimer is done, that every
// position of rule_index holds the key user space placed there. Done: none
// is queued, and every deleted rule's id is back in the pool (a reclaim
// gives the ids back last, once it has taken its batch off the queue).
func (d *Datapath) expectIndexMirrored(t *testing.T) {
	t.Helper()
	idle := eventually(5*time.Second, 10*time.Millisecond, func() bool {
		d.store.mu.Lock()
		defer d.store.mu.Unlock()
		return len(d.store.pending.index)+len(d.store.pending.slots)+len(d.store.pending.ids) == 0 &&
			d.store.ruleIDs.inUse(0) == len(d.store.rules)
	})
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	if !idle {
		t.Fatal("index entries still waiting for a grace period")
	}
	for pos, want := range d.store.index.keys {
		var e santaSantaIndexEntry
		if err := d.objs.RuleIndex.Lookup(uint32(pos), &e); err != nil {
			t.Fatal(err)
		}
		if e.Key != want {
			t.Errorf("position %d holds %+v, user space placed %+v", pos, e.Key, want)
		}
	}
}

// A new table is in memory from the start: no page of it is left to fault
// in while rules are installed.
func TestIndexTableResident(t *testing.T) {
	tab := newIndexTable(1 << 20)
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&tab.keys[0]))
	end := start + uintptr(len(tab.keys))*unsafe.Sizeof(tab.keys[0])
	start &^= page - 1
	resident := make([]byte, (end-start+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, start, end-start, uintptr(unsafe.Pointer(&resident[0]))); errno != 0 {
		t.Fatal("mincore:", errno)
	}
	runtime.KeepAlive(tab) // until mincore has looked
	missing := 0
	for _, r := range resident {
		if r&1 == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the table's %d pages are not in memory", missing, len(resident))
	}
}
