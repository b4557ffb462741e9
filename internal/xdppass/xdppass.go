// Package xdppass attaches an XDP program that passes every frame, for the
// client end of a veth pair: veth hands XDP_TX frames only to a peer that
// runs XDP.
package xdppass

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf/link"
)

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel xdppass ../../test/bpf/xdp_pass.bpf.c -- -I../../bpf/include

// Attach runs the pass program on the named interface (in the caller's
// network namespace) in native mode. Closing the returned link detaches it.
func Attach(ifname string) (link.Link, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("looking up interface: %w", err)
	}
	var objs xdppassObjects
	if err := loadXdppassObjects(&objs, nil); err != nil {
		return nil, fmt.Errorf("loading xdp_pass: %w", err)
	}
	defer objs.Close() // the link keeps the program alive
	l, err := link.AttachXDP(link.XDPOptions{Program: objs.XdpPass, Interface: iface.Index, Flags: link.XDPDriverMode})
	if err != nil {
		return nil, fmt.Errorf("attaching xdp_pass: %w", err)
	}
	return l, nil
}
