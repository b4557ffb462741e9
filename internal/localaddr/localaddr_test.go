package localaddr

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNewNetns runs f on a thread of its own in a new network namespace; the
// thread is never given back to the runtime's other goroutines.
func inNewNetns(t *testing.T, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unsharing the network namespace: %v", err)
			return
		}
		f()
	}()
	<-done
}

// ip runs ip(8) in the calling thread's network namespace.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Errorf("ip %v: %v: %s", args, err, out)
	}
}

// The table holds the host's addresses and broadcast addresses, IPv6
// link-local ones with their interface, and counts wider local routes; a
// new address wakes Wait, a route of another table does not.
func TestReadAndWait(t *testing.T) {
	inNewNetns(t, func() {
		ip(t, "link", "set", "lo", "up")
		ip(t, "link", "add", "la0", "type", "veth", "peer", "name", "la1")
		ip(t, "link", "set", "la0", "addrgenmode", "none")
		ip(t, "link", "set", "la1", "addrgenmode", "none")
		ip(t, "addr", "add", "10.55.0.1/24", "dev", "la0")
		ip(t, "addr", "add", "fd55::1/64", "dev", "la0", "nodad")
		ip(t, "addr", "add", "fe80::55/64", "dev", "la0", "nodad")
		ip(t, "link", "set", "la0", "up")
		ip(t, "link", "set", "la1", "up")
		w, err := Watch()
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		la0 := ifindex(t, "la0")
		want := map[Key]Kind{
			{Addr: netip.MustParseAddr("127.0.0.1")}:              Local,
			{Addr: netip.MustParseAddr("10.55.0.1")}:              Local,
			{Addr: netip.MustParseAddr("10.55.0.255")}:            Broadcast,
			{Addr: netip.MustParseAddr("::1")}:                    Local,
			{Addr: netip.MustParseAddr("fd55::1")}:                Local,
			{Addr: netip.MustParseAddr("fe80::55"), Ifindex: la0}: Local,
		}
		// The kernel adds an IPv6 address's local route in deferred work
		// once the link is up, even with nodad (a read at once missed them
		// in 1 CI run of ~30): read until they are there, for at most 2 s.
		var table Table
		var ranges Ranges
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if table, ranges, err = w.Read(); err != nil {
				t.Error(err)
				return
			}
			if hasAll(table, want) || time.Now().After(deadline) {
				break
			}
		}
		for k, kind := range want {
			if table[k] != kind {
				t.Errorf("%v: kind %d, want %d (table %v)", k, table[k], kind, table)
			}
		}
		if ranges < 1 {
			t.Errorf("%d wider local routes; want 127.0.0.0/8 counted", ranges)
		}

		woke := make(chan error, 1)
		wait := func() { go func() { woke <- w.Wait() }() }
		wait()
		// Let what the set-up set off settle: after a link comes up the
		// kernel adds addresses and routes of its own (IPv6 multicast,
		// link-local), and each wakes Wait.
		for quiet := false; !quiet; {
			select {
			case <-woke:
				wait()
			case <-time.After(300 * time.Millisecond):
				quiet = true
			}
		}
		ip(t, "route", "add", "10.66.0.0/16", "dev", "la0", "table", "100")
		select {
		case err := <-woke:
			t.Errorf("a route of table 100 woke Wait (%v)", err)
			return
		case <-time.After(200 * time.Millisecond):
		}
		ip(t, "addr", "add", "10.55.0.2/24", "dev", "la0")
		select {
		case err := <-woke:
			if err != nil {
				t.Error(err)
				return
			}
		case <-time.After(2 * time.Second):
			t.Error("a new address did not wake Wait")
			return
		}
		if table, _, err = w.Read(); err != nil || table[Key{Addr: netip.MustParseAddr("10.55.0.2")}] != Local {
			t.Errorf("after the change: %v, %v", table, err)
		}
	})
}

// ifindex is name's interface index, asked over netlink from the calling
// thread, hence in its network namespace.
func ifindex(t *testing.T, name string) uint32 {
	t.Helper()
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Errorf("ifindex of %s: %v", name, err)
		return 0
	}
	return uint32(ifc.Index)
}

// hasAll is whether table has every key of want, of its kind.
func hasAll(table Table, want map[Key]Kind) bool {
	for k, kind := range want {
		if table[k] != kind {
			return false
		}
	}
	return true
}
