package datapath

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// A data plane pinned by a process that died keeps answering; the next Open
// takes over: it detaches the old links, so Attach gets the XDP hook again.
func TestOpenTakesOverStalePins(t *testing.T) {
	// A private netns with a veth pair, so the test touches no real link.
	ns := enterNewNetns(t)
	defer ns()
	for _, args := range [][]string{
		{"link", "add", "santa-pin0", "type", "veth", "peer", "name", "santa-pin1"},
		{"link", "set", "santa-pin0", "up"},
		{"link", "set", "santa-pin1", "up"},
	} {
		if err := exec("ip", args...); err != nil {
			t.Fatalf("ip %v: %v", args, err)
		}
	}
	dir := filepath.Join(t.TempDir(), "bpffs", "santa")
	first, err := Open(Options{PinPath: dir, MaxRules: 64, MaxServices: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(filepath.Dir(dir), 0)
	if _, err := first.Attach("santa-pin0"); err != nil {
		t.Fatal(err)
	}
	first.Close() // as if killed: the pins stay

	second, err := Open(Options{PinPath: dir, MaxRules: 64, MaxServices: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	defer second.Unpin()
	att, err := second.Attach("santa-pin0")
	if err != nil {
		t.Fatal(err)
	}
	if att.XDP == model.XDPNone {
		t.Fatalf("second Attach got no XDP hook: %+v", att)
	}
	if _, err := os.Stat(filepath.Join(dir, "link_tc_santa-pin0")); err != nil {
		t.Fatalf("new TC link not pinned: %v", err)
	}
	iface, _ := net.InterfaceByName("santa-pin0")
	t.Logf("interface %d attached again in %s mode", iface.Index, att.XDP)
}

// bpffsDir is a directory in a bpffs of the test's own, unmounted when
// the test ends.
func bpffsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bpffs", "santa")
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := mountBPFFS(filepath.Dir(dir)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Dir(dir), 0) })
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Pins an older version left (the single `rules` map before the size
// classes) are removed by the next Open: they would keep their memory.
func TestOpenRemovesOldPins(t *testing.T) {
	dir := bpffsDir(t)
	old, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Pin(filepath.Join(dir, "rules")); err != nil {
		t.Fatal(err)
	}
	old.Close()

	d, err := Open(Options{PinPath: dir, MaxRules: 64, MaxServices: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	defer d.Unpin()
	if _, err := os.Stat(filepath.Join(dir, "rules")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old rules pin is still there (%v)", err)
	}
	for _, name := range []string{"services", "rule_index", "rules_small", "prog_santa_udp"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("pin %s: %v", name, err)
		}
	}
}

// lo has no native XDP: santad attaches it in generic mode. After a
// restart, the generic link it pinned is taken over, and Attach says so
// (the native attempt failing first must not hide it).
func TestRestartKeepsGenericXDP(t *testing.T) {
	first, dir, back := pinnedOnLo(t)
	defer back()
	first.Close() // santad stops: the pins stay

	second, err := Open(Options{PinPath: dir, MaxRules: 64, MaxServices: 4, KeepLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	defer second.Unpin()
	att, err := second.Attach("lo")
	if err != nil {
		t.Fatal(err)
	}
	if att.XDP != model.XDPGeneric {
		t.Errorf("after a restart, Attach(lo) reports XDP %q; want generic", att.XDP)
	}
	if err := second.DetachStale(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "link_xdp_generic_lo")); err != nil {
		t.Errorf("the generic XDP link is not pinned any more: %v", err)
	}
}

// A second data plane on the pin path of one that is open (a second santad
// with another state directory) is refused, naming the first's pid, and
// leaves the first's links attached.
func TestPinPathLocked(t *testing.T) {
	first, dir, back := pinnedOnLo(t)
	defer back()
	defer first.Unpin()
	for _, keepLinks := range []bool{false, true} {
		second, err := Open(Options{PinPath: dir, MaxRules: 64, MaxServices: 4, KeepLinks: keepLinks})
		if err == nil {
			second.Close()
			t.Fatalf("a second Open of %s (KeepLinks %t) succeeded", dir, keepLinks)
		}
		if want := fmt.Sprintf("in use by process %d", os.Getpid()); !strings.Contains(err.Error(), want) {
			t.Errorf("second Open: %v; want it to say %q", err, want)
		}
	}
	for _, pin := range []string{"link_xdp_generic_lo", "link_tc_lo", "services"} {
		if _, err := os.Stat(filepath.Join(dir, pin)); err != nil {
			t.Errorf("the first data plane's %s: %v", pin, err)
		}
	}
	first.Close()
	third, err := Open(Options{PinPath: dir, MaxRules: 64, MaxServices: 4, KeepLinks: true})
	if err != nil {
		t.Fatalf("Open once the first is closed: %v", err)
	}
	third.Close()
}

// pinnedOnLo enters a new network namespace (back leaves it) and opens a
// data plane pinned on a bpffs of the test's own, attached to lo, which
// has no native XDP: in generic mode.
func pinnedOnLo(t *testing.T) (d *Datapath, dir string, back func()) {
	t.Helper()
	back = enterNewNetns(t)
	dir = filepath.Join(t.TempDir(), "bpffs", "santa")
	d, err := Open(Options{PinPath: dir, MaxRules: 64, MaxServices: 4})
	if err != nil {
		back()
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Dir(dir), 0) })
	if att, err := d.Attach("lo"); err != nil || att.XDP != model.XDPGeneric {
		back()
		t.Fatalf("Attach(lo): %+v, %v; want generic XDP", att, err)
	}
	return d, dir, back
}

// A restarting Open (KeepLinks) loads santa_tcp onto the earlier
// process's registered_listeners only if that map is of this version's
// shape: one of another (here an array) is replaced by a new map rather
// than failing the start, and the address-keyed listeners map of an
// earlier version is removed.
func TestOpenReplacesIncompatibleListenersPin(t *testing.T) {
	dir := bpffsDir(t)
	for _, name := range []string{"listeners", "registered_listeners"} {
		old, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Pin(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		old.Close()
	}

	d, err := Open(Options{PinPath: dir, MaxRules: 64, MaxServices: 4, KeepLinks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	defer d.Unpin()
	if _, err := os.Stat(filepath.Join(dir, "listeners")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old listeners pin is still there (%v)", err)
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "registered_listeners"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Type() != ebpf.SkStorage {
		t.Errorf("registered_listeners pinned is a %v map", m.Type())
	}
}
