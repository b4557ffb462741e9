package datapath

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

type closedService struct {
	id   model.ServiceID
	info model.SocketInfo
}

// watch starts WatchSockets and returns the services it reports closed.
func watch(t *testing.T, d *Datapath) <-chan closedService {
	t.Helper()
	closed := make(chan closedService, 16)
	err := d.WatchSockets(model.DefaultCgroupPath, func(id model.ServiceID, info model.SocketInfo) { closed <- closedService{id, info} })
	if err != nil {
		t.Fatal(err)
	}
	return closed
}

// waitClosed waits up to a second for service id to be reported closed.
func waitClosed(t *testing.T, closed <-chan closedService, id model.ServiceID) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case c := <-closed:
		if c.id != id {
			t.Fatalf("service %d reported closed; want %d", c.id, id)
		}
	case <-time.After(time.Second):
		t.Fatalf("service %d not reported closed within 1 s", id)
	}
	return time.Since(start)
}

// Needs cgroup v2 and the cgroup/sock_release hook (Linux 5.9).
func TestClosedSocketEndsService(t *testing.T) {
	d := openTest(t)
	closed := watch(t, d)
	c := boundUDP(t, "127.0.0.1:0")
	svc := register(t, d, c)
	if _, err := d.AddRule(svc, hello()); err != nil {
		t.Fatal(err)
	}
	info, _ := d.Service(svc)

	c.Close()
	took := waitClosed(t, closed, svc)
	t.Logf("service dropped %v after close", took)
	if _, err := d.Service(svc); !errors.Is(err, model.ErrUnknownService) {
		t.Fatalf("Service after close = %v; want model.ErrUnknownService", err)
	}
	var v santaSantaService
	if err := d.objs.Services.Lookup(info.Cookie, &v); err == nil {
		t.Fatal("the services map still holds the closed socket")
	}
	// The slot and id come back: a new service can use the capacity.
	c2 := boundUDP(t, "127.0.0.1:0")
	if _, err := d.AddRule(register(t, d, c2), hello()); err != nil {
		t.Fatal(err)
	}
}

// A restarted process restores the services whose sockets are still open,
// then takes over the pinned sock_release link; one closed while no
// process watched is not restored, and one closed after it was restored,
// before the link was taken over, is dropped by EndRestore. Once sockets
// are watched, a restore is refused: a socket closing before it would be
// seen by neither program (before the order was fixed, such a service
// lived on).
func TestRestoreServices(t *testing.T) {
	ns := enterNewNetns(t)
	defer ns()
	first, opts := firstRun(t)
	open, gone, closing := boundUDP(t, "127.0.0.1:0"), boundUDP(t, "127.0.0.1:0"), boundUDP(t, "127.0.0.1:0")
	openID, goneID, closingID := register(t, first, open), register(t, first, gone), register(t, first, closing)
	openInfo, _ := first.Service(openID)
	goneInfo, _ := first.Service(goneID)
	closingInfo, _ := first.Service(closingID)
	first.Close() // as if killed: pins and links stay
	gone.Close()  // seen by the first process's program only

	second := nextRun(t, opts)
	for _, s := range []closedService{{openID, openInfo}, {closingID, closingInfo}} {
		if err := second.RestoreService(s.id, s.info, nil); err != nil {
			t.Fatalf("restoring an open socket's service: %v", err)
		}
	}
	if err := second.RestoreService(goneID, goneInfo, nil); !errors.Is(err, model.ErrSocketClosed) {
		t.Fatalf("restoring a closed socket's service = %v; want model.ErrSocketClosed", err)
	}
	closing.Close() // restored, not yet watched: the first program marks it
	closed := watch(t, second)
	if err := second.RestoreService(goneID, goneInfo, nil); err == nil || !strings.Contains(err.Error(), "watched already") {
		t.Fatalf("a restore after WatchSockets = %v; want it refused", err)
	}
	if dropped := second.EndRestore(); len(dropped) != 1 || dropped[0] != closingID {
		t.Fatalf("EndRestore dropped %v; want the service whose socket closed meanwhile, %d", dropped, closingID)
	}
	// The taken-over link runs the second process's program.
	open.Close()
	waitClosed(t, closed, openID)
}

// EndRestore drops a restored service whose socket closed, not whatever
// holds its id by then: a restored socket that closes after WatchSockets
// gives its id back at once, and a new socket may get it before EndRestore.
func TestEndRestoreKeepsAReusedID(t *testing.T) {
	ns := enterNewNetns(t)
	defer ns()
	first, opts := firstRun(t)
	old := boundUDP(t, "127.0.0.1:0")
	oldID := register(t, first, old)
	oldInfo, _ := first.Service(oldID)
	first.Close()

	second := nextRun(t, opts)
	if err := second.RestoreService(oldID, oldInfo, nil); err != nil {
		t.Fatal(err)
	}
	closed := watch(t, second)
	old.Close()
	waitClosed(t, closed, oldID)
	newID := register(t, second, boundUDP(t, "127.0.0.1:0"))
	if newID != oldID {
		t.Skipf("the new socket got id %d, not the freed %d: nothing to check", newID, oldID)
	}
	if dropped := second.EndRestore(); len(dropped) != 0 {
		t.Fatalf("EndRestore dropped %v: the new socket's service under the restored one's id", dropped)
	}
	if _, err := second.Service(newID); err != nil {
		t.Fatalf("the new service is gone: %v", err)
	}
}

// firstRun opens a pinned data plane watching sockets, as a santad that
// will be killed: closed, its pins and links stay for the next run.
func firstRun(t *testing.T) (*Datapath, Options) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bpffs", "santa")
	opts := Options{PinPath: dir, MaxRules: 64, MaxServices: 4}
	first, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Dir(dir), 0) })
	watch(t, first)
	return first, opts
}

// nextRun opens the data plane of a restarted santad over firstRun's pins,
// keeping its links until it takes them over.
func nextRun(t *testing.T, opts Options) *Datapath {
	t.Helper()
	opts.KeepLinks = true
	next, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		next.Close()
		next.Unpin()
	})
	return next
}

// A data plane answers for the addresses of the namespace it was opened in:
// attaching it to an interface of another namespace, where it would answer
// nothing, is refused.
func TestAttachInAnotherNamespaceRefused(t *testing.T) {
	d := openTest(t)
	back := enterNewNetns(t)
	defer back()
	if err := exec("ip", "link", "add", "na0", "type", "veth", "peer", "name", "na1"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Attach("na0"); err == nil || !strings.Contains(err.Error(), "another network namespace") {
		t.Fatalf("Attach from another namespace = %v; want it refused", err)
	}
}
