package datapath

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/santa-offload/santa/internal/model"
)

// ifaceLinks are the links that run the UDP programs on interfaces: XDP
// and TC ingress, by interface. Pinned ones outlive this process. Its lock
// guards the links by interface, which no other part touches.
type ifaceLinks struct {
	xdp, tc *ebpf.Program
	pins    *pins

	mu     sync.Mutex
	byName map[string][]link.Link
}

func newIfaceLinks(objs *santaObjects, p *pins) *ifaceLinks {
	return &ifaceLinks{xdp: objs.SantaUdp, tc: objs.SantaUdpTc, pins: p, byName: make(map[string][]link.Link)}
}

// Attach runs the data plane on an interface: XDP in native mode if the
// driver supports it, else generic, else none; plus the TC ingress program.
// With pinning on, the links are pinned and survive this process. Links an
// earlier process pinned for the interface (Options.KeepLinks) are pointed
// at this process's programs in place, so no packet goes unanswered. The
// interface must be in the network namespace Open ran in (sameNetns).
func (d *Datapath) Attach(ifname string) (model.Attachment, error) {
	if err := d.sameNetns(); err != nil {
		return model.Attachment{}, err
	}
	return d.ifaces.attach(ifname)
}

// Detach removes the data plane from an interface, pinned links included.
func (d *Datapath) Detach(ifname string) error { return d.ifaces.detach(ifname) }

// DetachStale removes the links an earlier process pinned for interfaces
// this one has not attached (Options.KeepLinks kept them).
func (d *Datapath) DetachStale() error { return d.ifaces.detachStale() }

func (a *ifaceLinks) attach(ifname string) (model.Attachment, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return model.Attachment{}, fmt.Errorf("looking up interface: %w", err)
	}
	att := model.Attachment{Interface: ifname, XDP: model.XDPNone}
	var links []link.Link
	keep := func(l link.Link, hook string, pinned bool) error {
		links = append(links, l)
		if pinned {
			return nil
		}
		if err := a.pins.pinLink(l, linkPin(ifname, hook)); err != nil {
			closeLinks(links)
			return err
		}
		return nil
	}

	for _, mode := range xdpModes {
		hook := "xdp_" + string(mode.name)
		l, pinned, err := a.xdpLink(ifname, iface.Index, hook, mode.flags)
		if err != nil {
			continue // not in this mode (lo has no native XDP): the next
		}
		att.XDP = mode.name
		if err := keep(l, hook, pinned); err != nil {
			return model.Attachment{}, err
		}
		break
	}
	tc := a.pins.takeOver(linkPin(ifname, "tc"), a.tc)
	tcPinned := tc != nil
	if !tcPinned {
		tc, err = link.AttachTCX(link.TCXOptions{Program: a.tc, Attach: ebpf.AttachTCXIngress, Interface: iface.Index})
		if err != nil {
			closeLinks(links)
			return model.Attachment{}, fmt.Errorf("attaching TC program to %s: %w", ifname, err)
		}
	}
	att.TC = true
	if err := keep(tc, "tc", tcPinned); err != nil {
		return model.Attachment{}, err
	}
	a.mu.Lock()
	closeLinks(a.byName[ifname])
	a.byName[ifname] = links
	a.mu.Unlock()
	return att, nil
}

// xdpModes are the XDP modes Attach tries, best first.
var xdpModes = []struct {
	name  model.XDPMode
	flags link.XDPAttachFlags
}{{model.XDPNative, link.XDPDriverMode}, {model.XDPGeneric, link.XDPGenericMode}}

// xdpLink is the interface's XDP link in one mode: the one an earlier
// process pinned for hook, taken over (pinned), or a new one.
func (a *ifaceLinks) xdpLink(ifname string, index int, hook string, flags link.XDPAttachFlags) (l link.Link, pinned bool, err error) {
	if l := a.pins.takeOver(linkPin(ifname, hook), a.xdp); l != nil {
		return l, true, nil
	}
	l, err = link.AttachXDP(link.XDPOptions{Program: a.xdp, Interface: index, Flags: flags})
	return l, false, err
}

func (a *ifaceLinks) detach(ifname string) error {
	a.mu.Lock()
	closeLinks(a.byName[ifname])
	delete(a.byName, ifname)
	a.mu.Unlock()
	var errs []error
	for _, hook := range linkHooks {
		if p := a.pins.at(linkPin(ifname, hook)); p != "" {
			errs = append(errs, unpinLink(p))
		}
	}
	return errors.Join(errs...)
}

func (a *ifaceLinks) detachStale() error {
	var errs []error
	for _, hook := range linkHooks {
		pattern := a.pins.at(linkPin("*", hook))
		if pattern == "" {
			return nil
		}
		stale, _ := filepath.Glob(pattern)
		for _, p := range stale {
			ifname := strings.TrimPrefix(filepath.Base(p), "link_"+hook+"_")
			a.mu.Lock()
			_, mine := a.byName[ifname]
			a.mu.Unlock()
			if !mine {
				errs = append(errs, unpinLink(p))
			}
		}
	}
	return errors.Join(errs...)
}

// close releases this process's links; pinned ones stay attached.
func (a *ifaceLinks) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ls := range a.byName {
		closeLinks(ls)
	}
}

// linkHooks are the per-interface links: XDP in either mode, and TC.
var linkHooks = []string{"xdp_native", "xdp_generic", "tc"}

// linkPin names the pin of an interface's link for hook.
func linkPin(ifname, hook string) string { return "link_" + hook + "_" + ifname }
