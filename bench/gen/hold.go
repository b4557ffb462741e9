package gen

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/santa-offload/santa/internal/netns"
)

// Each BPF_PROG_TEST_RUN of an XDP program adds it to the kernel's XDP
// dispatcher and takes it out again, and each change waits for an RCU grace
// period: measured here, two waits of about 10 ms per call, which left the
// sending thread idle two thirds of the time. A program attached to some
// interface stays in the dispatcher, and a test run then only counts a
// reference. So the sender is attached (generic XDP) to a veth pair of its
// own, which is down and carries nothing.

// holder is the parked veth pair that keeps a program in the dispatcher,
// in the network namespace of the thread that made it.
type holder struct {
	name string
	ns   *os.File
	xdp  link.Link
}

// holders numbers the pairs of this process.
var holders atomic.Uint32

func hold(prog *ebpf.Program) (*holder, error) {
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	if err := sweepStale(); err != nil {
		ns.Close()
		return nil, err
	}
	name := fmt.Sprintf("gh%d.%d", os.Getpid(), holders.Add(1))
	if out, err := exec.Command("ip", "link", "add", name, "type", "veth", "peer", "name", name+"p").CombinedOutput(); err != nil {
		ns.Close()
		return nil, fmt.Errorf("adding the parked veth %s: %v: %s", name, err, out)
	}
	h := &holder{name: name, ns: ns}
	iface, err := net.InterfaceByName(name)
	if err == nil {
		h.xdp, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: iface.Index, Flags: link.XDPGenericMode})
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("parking the sender on %s: %w", name, err), h.release())
	}
	return h, nil
}

// stalePair matches the name of a parked pair's first end: gh<pid>.<n>.
var stalePair = regexp.MustCompile(`^gh([0-9]+)\.[0-9]+$`)

// sweepStale removes, from the caller's network namespace, the parked
// pairs of generators that died without releasing them (SIGKILL): they
// hold a program and would otherwise stay until the namespace goes.
func sweepStale() error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, iface := range ifaces {
		m := stalePair.FindStringSubmatch(iface.Name)
		if m == nil {
			continue
		}
		if _, err := os.Stat("/proc/" + m[1]); !errors.Is(err, os.ErrNotExist) {
			continue // its generator still runs (or the pid was reused: leave it)
		}
		if out, err := exec.Command("ip", "link", "del", iface.Name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("removing the stale parked veth %s: %v: %s", iface.Name, err, out))
		}
	}
	return errors.Join(errs...)
}

// release detaches the program and removes the pair (both ends go), from
// a thread in the pair's namespace, which may not be the caller's.
func (h *holder) release() error {
	var err error
	if h.xdp != nil {
		err = h.xdp.Close()
	}
	derr := netns.In(h.ns, func() error {
		if out, err := exec.Command("ip", "link", "del", h.name).CombinedOutput(); err != nil {
			return fmt.Errorf("removing the parked veth %s: %v: %s", h.name, err, out)
		}
		return nil
	})
	return errors.Join(err, derr, h.ns.Close())
}
