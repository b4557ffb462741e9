package agent

import (
	"slices"
	"sync"
	"testing"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/server/servertest"
)

// A socket that joins a group with forms (the server opens one more on
// the address) gets them without the agent's lock: a zone change while
// they are added is handled at once, and the new service ends with what
// the change left: the new answer, not the one listed for it before the
// change, and not the form the change deleted.
func TestZoneChangeDuringJoin(t *testing.T) {
	r := newRig(t, shortRecheck)
	r.installAll()
	r.srv.Open(t)
	r.finder.Set(t, servertest.UDP(r.srv.Conns())...)
	var once sync.Once
	r.d.mu.Lock()
	r.d.afterAdd = func() {
		once.Do(func() {
			r.srv.SetZone(exampleZone(2, 99))
			r.srv.Drop(isName("mail.example.com."))
			r.pollChanged("example.com", "the new socket's rules")
		})
	}
	r.d.mu.Unlock()
	r.a.scan(r.ctx)
	if sv := r.a.services[3]; sv == nil || sv.group != r.a.groups[r.srv.Addr()] {
		t.Fatalf("services %v; want the new socket's 3 in the group", r.a.services)
	}
	// The zone change replaced www and deleted mail on the group's
	// services; the new one's rules of both, added meanwhile, were deleted
	// and www's added anew.
	want := []string{"add 3: 1", "add 3: 3", "delete 3: 2", "txn 1: replace 1 delete 1", "txn 2: replace 1 delete 1"}
	if got := sortedBatches(r.d); !slices.Equal(got, want) {
		t.Fatalf("batches %q; want %q", got, want)
	}
	r.srv.Drop(nil) // for the test's own queries
	r.wantInstalled("alias.example.com", "www.example.com")
	if got, want := r.installed(3), []string{"alias.example.com", "www.example.com"}; !slices.Equal(got, want) {
		t.Fatalf("service 3 has rules for %v; want %v", got, want)
	}
}

// listJoin opens one more socket of r's server and lists its join
// (scanLocked), not yet added.
func (r *rig) listJoin() (Santad, *joining) {
	r.t.Helper()
	r.srv.Open(r.t)
	r.finder.Set(r.t, servertest.UDP(r.srv.Conns())...)
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	joins := r.a.scanLocked()
	if len(joins) != 1 {
		r.t.Fatalf("%d joins; want 1", len(joins))
	}
	return r.a.sd, joins[0]
}

// A form a zone change deleted after the join was listed, before its
// batch, is not added to the new socket with its old answer.
func TestJoinAddsNoFormDeletedBeforeItsBatch(t *testing.T) {
	r := newRig(t, shortRecheck)
	r.installAll()
	sd, j := r.listJoin()
	r.srv.SetZone(exampleZone(2, 99))
	r.srv.Drop(isName("www.example.com.")) // not re-checked: deleted
	if _, changed := r.a.pollOnce(r.ctx, r.zone("example.com")); !changed {
		t.Fatal("the new serial was not seen")
	}
	r.srv.Drop(nil)
	r.a.join(r.ctx, sd, j)
	if got := sortedBatches(r.d); !slices.Contains(got, "add 3: 2") || slices.Contains(got, "delete 3: 1") {
		t.Fatalf("batches %q; want alias and mail added to service 3, and nothing deleted again", got)
	}
	r.wantInstalled("alias.example.com", "mail.example.com")
	if got, want := r.installed(3), []string{"alias.example.com", "mail.example.com"}; !slices.Equal(got, want) {
		t.Fatalf("service 3 has rules for %v; want %v", got, want)
	}
}

// A form deleted and learned again under the same key while its batch
// is added to a joining socket: the window's install of the new form on
// that socket is refused (the old rule has its condition), and the join,
// once it has deleted the old rule, adds the new one.
func TestJoinWhileAFormIsLearnedAgain(t *testing.T) {
	r := newRig(t, shortRecheck)
	r.installAll()
	sd, j := r.listJoin()
	done := false // the hook runs again for the window's own adds
	r.d.mu.Lock()
	r.d.afterAdd = func() {
		if done {
			return
		}
		done = true
		r.srv.SetZone(exampleZone(2, 99))
		r.srv.Drop(isName("www.example.com.")) // not re-checked: deleted
		if _, changed := r.a.pollOnce(r.ctx, r.zone("example.com")); !changed {
			t.Error("the new serial was not seen")
		}
		r.srv.Drop(nil)
		r.d.setHot(1, hot(30, "www.example.com"))
		r.tick() // www learned again: installed on 1 and 2, refused on 3
	}
	r.d.mu.Unlock()
	r.a.join(r.ctx, sd, j)
	r.wantInstalled("alias.example.com", "mail.example.com", "www.example.com")
	if got, want := r.installed(3), []string{"alias.example.com", "mail.example.com", "www.example.com"}; !slices.Equal(got, want) {
		t.Fatalf("service 3 has rules for %v; want %v", got, want)
	}
}

// A zone change handled while the join's first batch is added deletes
// the forms of the later batches: they are not added with their old
// answers.
func TestJoinLaterBatchesAfterAChange(t *testing.T) {
	r, hot := newBigRig(t)
	r.tick()
	if got := len(r.installed(1)); got != len(hot) {
		t.Fatalf("%d forms installed; want %d (%+v)", got, len(hot), r.a.stats)
	}
	r.d.takeBatches()
	sd, j := r.listJoin()
	var once sync.Once
	r.d.mu.Lock()
	r.d.afterAdd = func() {
		once.Do(func() {
			z, _ := bigZone(2, len(hot), 2)
			r.srv.SetZone(z)
			r.srv.Drop(func(m *dnsmsg.Message) bool { return m.Question[0].Type != dnsmsg.TypeSOA })
			if _, changed := r.a.pollOnce(r.ctx, r.zone("big.test")); !changed {
				t.Error("the new serial was not seen")
			}
			r.srv.Drop(nil)
		})
	}
	r.d.mu.Unlock()
	r.a.join(r.ctx, sd, j)
	// One batch added, then deleted again: the change deleted every form.
	if got := sortedBatches(r.d); len(got) != 4 || got[0][:6] != "add 3:" || got[1][:9] != "delete 3:" {
		t.Fatalf("batches %q; want one batch added to service 3 and deleted again, and the change's deletions", got)
	}
	r.wantInstalled()
	if got := r.installed(3); len(got) != 0 {
		t.Fatalf("service 3 has rules for %d forms; want none", len(got))
	}
}

// The same, the other way round: the join has deleted the old rule and
// found nothing left to add before the install of the form learned again
// (refused on the joining socket while the old rule was there) notes it:
// the install adds it to the socket that lacks it.
func TestJoinEndsBeforeTheFormLearnedAgainIsNoted(t *testing.T) {
	r := newRig(t, shortRecheck)
	r.installAll()
	sd, j := r.listJoin()
	var mu sync.Mutex
	calls := 0
	installAdded, joinDone, tickDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	r.d.mu.Lock()
	r.d.afterAdd = func() {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch n {
		case 1: // the join's batch, with www's old rule, is on service 3
			r.srv.SetZone(exampleZone(2, 99))
			r.srv.Drop(isName("www.example.com."))
			if _, changed := r.a.pollOnce(r.ctx, r.zone("example.com")); !changed {
				t.Error("the new serial was not seen")
			}
			r.srv.Drop(nil)
			r.d.setHot(1, hot(30, "www.example.com"))
			go func() { defer close(tickDone); r.tick() }()
			<-installAdded
		case 4: // the install's adds on services 1, 2 and 3 (refused) are done
			close(installAdded)
			<-joinDone
		}
	}
	r.d.mu.Unlock()
	r.a.join(r.ctx, sd, j)
	close(joinDone)
	<-tickDone
	r.wantInstalled("alias.example.com", "mail.example.com", "www.example.com")
	if got, want := r.installed(3), []string{"alias.example.com", "mail.example.com", "www.example.com"}; !slices.Equal(got, want) {
		t.Fatalf("service 3 has rules for %v; want %v", got, want)
	}
}
