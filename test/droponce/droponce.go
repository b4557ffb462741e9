// Package droponce drops one TCP segment on its way into an interface, for
// tests that need data to arrive out of order (test/bpf/drop_once.bpf.c).
// On the way in, as a lossy path would: a segment dropped on the way out is
// a local drop the sender sees, and sends again later with the data
// written meanwhile merged into it.
package droponce

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel droponce ../bpf/drop_once.bpf.c -- -I../../bpf/include

// Dropper drops the first IPv4 TCP segment reaching an interface whose
// payload starts with its marker.
type Dropper struct {
	objs droponceObjects
	link link.Link
}

// Attach starts dropping on the named interface's ingress (tcx, in the
// caller's network namespace). On loopback, that is after the sender sent.
func Attach(ifname string, marker [4]byte) (*Dropper, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("looking up interface: %w", err)
	}
	spec, err := loadDroponce()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["marker"].Set(marker); err != nil {
		return nil, fmt.Errorf("setting the marker: %w", err)
	}
	d := &Dropper{}
	if err := spec.LoadAndAssign(&d.objs, nil); err != nil {
		return nil, fmt.Errorf("loading drop_once: %w", err)
	}
	d.link, err = link.AttachTCX(link.TCXOptions{Interface: iface.Index, Program: d.objs.DropOnce, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		d.objs.Close()
		return nil, fmt.Errorf("attaching drop_once: %w", err)
	}
	return d, nil
}

// Dropped says whether the segment was dropped.
func (d *Dropper) Dropped() (bool, error) {
	var n uint32
	if err := d.objs.Dropped.Get(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}

// Close detaches the program.
func (d *Dropper) Close() error {
	return errors.Join(d.link.Close(), d.objs.Close())
}
