package datapath

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/santa-offload/santa/internal/model"
)

// Attach runs the data plane on an interface: XDP in native mode if the
// driver supports it, else generic, else none; plus the TC ingress program.
// With pinning on, the links are pinned and survive this process. Links an
// earlier process pinned for the interface (Options.KeepLinks) are pointed
// at this process's programs in place, so no packet goes unanswered.
func (d *Datapath) Attach(ifname string) (model.Attachment, error) {
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
		if err := d.pinLink(l, d.linkPin(ifname, hook)); err != nil {
			closeLinks(links)
			return err
		}
		return nil
	}

	for _, mode := range []struct {
		name  model.XDPMode
		flags link.XDPAttachFlags
	}{{model.XDPNative, link.XDPDriverMode}, {model.XDPGeneric, link.XDPGenericMode}} {
		hook := "xdp_" + string(mode.name)
		l := d.takeOver(d.linkPin(ifname, hook), d.objs.SantaUdp)
		pinned := l != nil
		if !pinned {
			l, err = link.AttachXDP(link.XDPOptions{Program: d.objs.SantaUdp, Interface: iface.Index, Flags: mode.flags})
		}
		if l != nil && err == nil {
			att.XDP = mode.name
			if err := keep(l, hook, pinned); err != nil {
				return model.Attachment{}, err
			}
			break
		}
	}
	tc := d.takeOver(d.linkPin(ifname, "tc"), d.objs.SantaUdpTc)
	tcPinned := tc != nil
	if !tcPinned {
		tc, err = link.AttachTCX(link.TCXOptions{Program: d.objs.SantaUdpTc, Attach: ebpf.AttachTCXIngress, Interface: iface.Index})
		if err != nil {
			closeLinks(links)
			return model.Attachment{}, fmt.Errorf("attaching TC program to %s: %w", ifname, err)
		}
	}
	att.TC = true
	if err := keep(tc, "tc", tcPinned); err != nil {
		return model.Attachment{}, err
	}
	d.mu.Lock()
	closeLinks(d.links[ifname])
	d.links[ifname] = links
	d.mu.Unlock()
	return att, nil
}

// takeOver points a link an earlier process pinned at prog, or returns nil
// (and removes the pin) if there is none or it cannot be updated.
func (d *Datapath) takeOver(pin string, prog *ebpf.Program) link.Link {
	if d.pinPath == "" {
		return nil
	}
	old, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return nil
	}
	if err := old.Update(prog); err != nil {
		old.Unpin()
		old.Close()
		return nil
	}
	return old
}

// attachToCgroup attaches prog to the cgroup v2 hierarchy root, or, if an
// earlier process pinned its link as name, points that link at prog: a
// socket meanwhile is seen by one of the two programs.
func (d *Datapath) attachToCgroup(root, name string, typ ebpf.AttachType, prog *ebpf.Program) (link.Link, error) {
	pin := filepath.Join(d.pinPath, name)
	if l := d.takeOver(pin, prog); l != nil {
		return l, nil
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: root, Attach: typ, Program: prog})
	if err != nil {
		return nil, fmt.Errorf("attaching %v to %s: %w", prog, root, err)
	}
	if err := d.pinLink(l, pin); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// pinLink pins a new link at p unless pinning is off.
func (d *Datapath) pinLink(l link.Link, p string) error {
	if d.pinPath == "" {
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing old link pin: %w", err)
	}
	if err := l.Pin(p); err != nil {
		return fmt.Errorf("pinning link: %w", err)
	}
	return nil
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
	for _, hook := range linkHooks {
		errs = append(errs, unpinLink(d.linkPin(ifname, hook)))
	}
	return errors.Join(errs...)
}

// DetachStale removes the links an earlier process pinned for interfaces
// this one has not attached (Options.KeepLinks kept them).
func (d *Datapath) DetachStale() error {
	if d.pinPath == "" {
		return nil
	}
	var errs []error
	for _, hook := range linkHooks {
		stale, _ := filepath.Glob(d.linkPin("*", hook))
		for _, p := range stale {
			ifname := strings.TrimPrefix(filepath.Base(p), "link_"+hook+"_")
			d.mu.Lock()
			_, mine := d.links[ifname]
			d.mu.Unlock()
			if !mine {
				errs = append(errs, unpinLink(p))
			}
		}
	}
	return errors.Join(errs...)
}

// linkHooks are the per-interface links: XDP in either mode, and TC.
var linkHooks = []string{"xdp_native", "xdp_generic", "tc"}

func (d *Datapath) linkPin(ifname, hook string) string {
	return filepath.Join(d.pinPath, "link_"+hook+"_"+ifname)
}

// unpinLink detaches a pinned link; a missing pin is no error.
func unpinLink(p string) error {
	l, err := link.LoadPinnedLink(p, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading pinned link %s: %w", p, err)
	}
	return errors.Join(l.Unpin(), l.Close())
}

func closeLinks(links []link.Link) {
	for _, l := range links {
		l.Close()
	}
}
