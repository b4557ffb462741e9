package datapath

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// XDPMode says how santa_udp runs on an interface.
type XDPMode string

const (
	XDPNative  XDPMode = "native"  // in the driver, before any skb exists
	XDPGeneric XDPMode = "generic" // on the skb, for drivers without XDP
	XDPNone    XDPMode = "none"    // TC only
)

// Attachment tells where the data plane runs on one interface.
type Attachment struct {
	Interface string
	XDP       XDPMode
	TC        bool // santa_udp_tc on ingress: always, for what XDP cannot answer
}

// Attach runs the data plane on an interface: XDP in native mode if the
// driver supports it, else generic, else none; plus the TC ingress program.
// With pinning on, the links are pinned and survive this process.
func (d *Datapath) Attach(ifname string) (Attachment, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return Attachment{}, fmt.Errorf("looking up interface: %w", err)
	}
	att := Attachment{Interface: ifname, XDP: XDPNone}
	var links []link.Link

	for _, mode := range []struct {
		name  XDPMode
		flags link.XDPAttachFlags
	}{{XDPNative, link.XDPDriverMode}, {XDPGeneric, link.XDPGenericMode}} {
		l, err := link.AttachXDP(link.XDPOptions{Program: d.objs.SantaUdp, Interface: iface.Index, Flags: mode.flags})
		if err == nil {
			att.XDP = mode.name
			links = append(links, l)
			break
		}
	}
	tc, err := link.AttachTCX(link.TCXOptions{Program: d.objs.SantaUdpTc, Attach: ebpf.AttachTCXIngress, Interface: iface.Index})
	if err != nil {
		closeLinks(links)
		return Attachment{}, fmt.Errorf("attaching TC program to %s: %w", ifname, err)
	}
	att.TC = true
	links = append(links, tc)

	if d.pinPath != "" {
		for i, l := range links {
			p := d.linkPin(ifname, i == len(links)-1)
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				closeLinks(links)
				return Attachment{}, fmt.Errorf("removing old link pin: %w", err)
			}
			if err := l.Pin(p); err != nil {
				closeLinks(links)
				return Attachment{}, fmt.Errorf("pinning link: %w", err)
			}
		}
	}
	d.mu.Lock()
	closeLinks(d.links[ifname])
	d.links[ifname] = links
	d.mu.Unlock()
	return att, nil
}

// Detach removes the data plane from an interface, pinned links included.
func (d *Datapath) Detach(ifname string) error {
	d.mu.Lock()
	closeLinks(d.links[ifname])
	delete(d.links, ifname)
	d.mu.Unlock()
	if d.pinPath == "" {
		return nil
	}
	var errs []error
	for _, tc := range []bool{false, true} {
		l, err := link.LoadPinnedLink(d.linkPin(ifname, tc), nil)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, l.Unpin(), l.Close())
	}
	return errors.Join(errs...)
}

func (d *Datapath) linkPin(ifname string, tc bool) string {
	hook := "xdp"
	if tc {
		hook = "tc"
	}
	return filepath.Join(d.pinPath, "link_"+hook+"_"+ifname)
}

func closeLinks(links []link.Link) {
	for _, l := range links {
		l.Close()
	}
}
