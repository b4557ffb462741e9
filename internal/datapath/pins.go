package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/santa-offload/santa/internal/flock"
)

// pins is the directory on bpffs where the data plane outlives this
// process: its maps, programs and links. Its path is "" when nothing is
// pinned (Options.NoPin, or after Unpin); every part that attaches
// something pins its link here.
type pins struct {
	mu  sync.Mutex
	dir string
}

func (p *pins) path() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dir
}

// at is the pin of name, or "" when nothing is pinned.
func (p *pins) at(name string) string {
	dir := p.path()
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// prepare mounts bpffs where dir is to be (these machines do not mount it
// at boot) and makes dir.
func prepare(dir string) error {
	if err := mountBPFFS(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating pin directory: %w", err)
	}
	return nil
}

// lockPinPath locks dir for as long as the returned file is open: a second
// santad with the same pin path (and another state directory, which has a
// lock of its own) would take over, or detach, what the first pinned while
// the first goes on as if it were attached.
func lockPinPath(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the pin path: %w", err)
	}
	if err := flock.Lock(f); err != nil {
		f.Close()
		var held *flock.HeldError
		if !errors.As(err, &held) {
			return nil, err
		}
		return nil, fmt.Errorf("the pin path %s is in use by %s: each santad needs a pin path of its own (pin_path)", dir, held.Holder("another santad"))
	}
	return f, nil
}

// pinObjects pins the maps and programs in dir, replacing older pins, and
// makes dir the pin path.
func (p *pins) pinObjects(dir string, objs *santaObjects, tcp *tcpObjects) error {
	named := map[string]interface{ Pin(string) error }{
		"services": objs.Services, "rule_index": objs.RuleIndex,
		"rules_small": objs.RulesSmall, "rules_medium": objs.RulesMedium, "rules_large": objs.RulesLarge,
		"rules_huge": objs.RulesHuge,
		"rule_stats": objs.RuleStats, "service_stats": objs.ServiceStats,
		"path_stats": objs.PathStats, "closed_sockets": objs.ClosedSockets,
		"connections": tcp.Connections, "registered_listeners": tcp.RegisteredListeners, "tcp_conns": tcp.TcpConns,
		"tcp_path_stats": tcp.TcpPathStats,
		"prog_santa_udp": objs.SantaUdp, "prog_santa_udp_tc": objs.SantaUdpTc,
		"prog_santa_sock_release": objs.SantaSockRelease, "prog_santa_tcp_sockops": tcp.SantaTcpSockops,
		"prog_santa_tcp_accepted": tcp.SantaTcpAccepted,
		"prog_santa_tcp_verdict":  tcp.SantaTcpVerdict, "prog_santa_tcp_reply": tcp.SantaTcpReply,
	}
	for name, obj := range named {
		path := filepath.Join(dir, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing old pin %s: %w", path, err)
		}
		if err := obj.Pin(path); err != nil {
			return fmt.Errorf("pinning %s: %w", name, err)
		}
	}
	p.mu.Lock()
	p.dir = dir
	p.mu.Unlock()
	return removeOldPins(dir)
}

// oldPins are the pins earlier versions made that this one does not: the
// single rules map before the size classes, the listeners by address
// before registered_listeners.
var oldPins = []string{"rules", "listeners"}

// removeOldPins removes what earlier versions pinned in dir and this one
// no longer does: those maps would otherwise keep their memory, gigabytes
// at a million rules, for as long as the pin lives. Only known names go:
// the directory may be shared.
func removeOldPins(dir string) error {
	var errs []error
	for _, name := range oldPins {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing old pin: %w", err))
		}
	}
	return errors.Join(errs...)
}

// detachStale removes links an earlier process pinned in dir (it may have
// been killed): they still run that process's programs with its rules, and
// hold the interfaces' XDP hooks.
func detachStale(dir string) error {
	stale, err := filepath.Glob(filepath.Join(dir, "link_*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range stale {
		errs = append(errs, unpinLink(p))
	}
	return errors.Join(errs...)
}

// remove removes every pin, links included, so that the data plane goes
// away once the last handle is closed; nothing is pinned afterwards.
func (p *pins) remove() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir == "" {
		return nil
	}
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("removing pins: %w", err)
	}
	p.dir = ""
	return nil
}

// takeOver points the link an earlier process pinned as name at prog, or
// returns nil (and removes the pin) if there is none or it cannot be
// updated.
func (p *pins) takeOver(name string, prog *ebpf.Program) link.Link {
	path := p.at(name)
	if path == "" {
		return nil
	}
	old, err := link.LoadPinnedLink(path, nil)
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

// pinLink pins a new link as name unless pinning is off.
func (p *pins) pinLink(l link.Link, name string) error {
	path := p.at(name)
	if path == "" {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing old link pin: %w", err)
	}
	if err := l.Pin(path); err != nil {
		return fmt.Errorf("pinning link: %w", err)
	}
	return nil
}

// attachToCgroup attaches prog to the cgroup v2 hierarchy root, or, if an
// earlier process pinned its link as name, points that link at prog: a
// socket meanwhile is seen by one of the two programs.
func (p *pins) attachToCgroup(root, name string, typ ebpf.AttachType, prog *ebpf.Program) (link.Link, error) {
	if l := p.takeOver(name, prog); l != nil {
		return l, nil
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: root, Attach: typ, Program: prog})
	if err != nil {
		return nil, fmt.Errorf("attaching %v to %s: %w", prog, root, err)
	}
	if err := p.pinLink(l, name); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// unpinLink detaches a pinned link; a missing pin is no error.
func unpinLink(path string) error {
	l, err := link.LoadPinnedLink(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading pinned link %s: %w", path, err)
	}
	return errors.Join(l.Unpin(), l.Close())
}

func closeLinks(links []link.Link) {
	for _, l := range links {
		l.Close()
	}
}
