package datapath

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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
	if att.XDP == XDPNone {
		t.Fatalf("second Attach got no XDP hook: %+v", att)
	}
	if _, err := os.Stat(filepath.Join(dir, "link_tc_santa-pin0")); err != nil {
		t.Fatalf("new TC link not pinned: %v", err)
	}
	iface, _ := net.InterfaceByName("santa-pin0")
	t.Logf("interface %d attached again in %s mode", iface.Index, att.XDP)
}
