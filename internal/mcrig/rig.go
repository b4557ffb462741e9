// Package mcrig is a real memcached (Debian's) behind a real santad, in a
// network namespace of its own, for the linearizability check
// (internal/mccheck) in tests and benchmarks: memcached's TCP listener and
// UDP socket attached and put in one generation domain (docs/memcached.md,
// "Using it from santad"), and installers that follow the agent's
// protocol to race the checker's writers. Needs root.
package mcrig

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/mccheck"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/netproc"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/internal/santadtest"
)

// Addr is memcached's address (TCP and UDP) in the rig's namespace.
var Addr = netip.MustParseAddrPort("127.0.0.1:11211")

// Rig is memcached and santad (serving lo) in a namespace.
type Rig struct {
	NS     *santadtest.Netns
	Santad *santadtest.Santad
	Client *client.Client // the rig's own connection to santad
	// TCP and UDP are memcached's services; TCP starts the domain.
	TCP, UDP uint32

	mc              *netproc.Proc
	listeners, udps []procsock.Socket // memcached's sockets
	stats           *client.Client    // KernelAnswered's
}

// Start builds santad into dir (the working directory must be inside the
// module), starts it and memcached (2 worker threads, at most 1 GiB) in a
// new namespace named after suffix (lowercase letters), and, if attach,
// attaches and marks memcached's sockets (else TCP and UDP stay 0: an
// agent does it). Close undoes it all, also after an error.
func Start(dir, suffix string, attach bool) (r *Rig, err error) {
	if _, err := exec.LookPath("memcached"); err != nil {
		return nil, errors.New("memcached is not installed (make test-deps)")
	}
	santadtest.SweepStale()
	r = &Rig{}
	defer func() {
		if err != nil {
			r.Close()
			r = nil
		}
	}()
	if r.NS, err = santadtest.NewNetns(santadtest.NetnsName(suffix)); err != nil {
		return r, err
	}
	bin, err := santadtest.Build(dir)
	if err != nil {
		return r, err
	}
	r.Santad = santadtest.New(bin, r.NS, dir, santadtest.PinPath(suffix))
	if err := r.Santad.Start(); err != nil {
		return r, err
	}
	if err := r.startMemcached(dir); err != nil {
		return r, err
	}
	if r.Client, err = client.Dial(r.Santad.Socket); err != nil {
		return r, err
	}
	if r.stats, err = client.Dial(r.Santad.Socket); err != nil {
		return r, err
	}
	if !attach {
		return r, nil
	}
	return r, r.attachAll()
}

// startMemcached starts memcached (netproc: it dies with this process)
// and waits until its sockets show.
func (r *Rig) startMemcached(dir string) error {
	port := strconv.Itoa(int(Addr.Port()))
	nsPath := netns.Named(r.NS.Name)
	mc, err := netproc.Start(netproc.Spec{
		Name: "memcached", Netns: r.NS.Name, LogPath: filepath.Join(dir, "memcached.log"),
		Argv: []string{"memcached", "-U", port, "-p", port, "-l", Addr.Addr().String(),
			"-m", "1024", "-c", "256", "-t", "2", "-u", "nobody"},
		ReadyTimeout: 10 * time.Second,
		// Its sockets, found without connecting: a connection accepted
		// before the listener is marked would hold the domain back.
		Ready: func() (err error) {
			if r.listeners, err = procsock.ListeningTCP(nsPath, Addr.Port(), Addr.Addr()); err != nil || len(r.listeners) == 0 {
				return fmt.Errorf("no TCP listener on %v (%v)", Addr, err)
			}
			if r.udps, err = procsock.BoundUDP(nsPath, Addr.Port(), Addr.Addr()); err != nil || len(r.udps) == 0 {
				return fmt.Errorf("no UDP socket on %v (%v)", Addr, err)
			}
			return nil
		},
	})
	r.mc = mc
	return err
}

// attachAll attaches memcached's sockets and marks them, the listener's
// domain for both.
func (r *Rig) attachAll() error {
	var err error
	if r.TCP, err = r.attach(r.listeners[0].Inode, nil); err != nil {
		return err
	}
	r.UDP, err = r.attach(r.udps[0].Inode, &r.TCP)
	return err
}

// attach attaches the socket of inode, taken from memcached, and marks it
// memcached's, in the domain of service *domain (nil: its own).
func (r *Rig) attach(inode uint64, domain *uint32) (uint32, error) {
	pid, fd, err := procsock.Holder(inode)
	if err != nil {
		return 0, err
	}
	own, err := procsock.TakeFD(pid, fd)
	if err != nil {
		return 0, err
	}
	defer unix.Close(own)
	svc, err := r.Client.AttachFD(own)
	if err != nil {
		return 0, err
	}
	if domain == nil {
		domain = &svc.ServiceID
	}
	return svc.ServiceID, r.Client.SetParser(svc.ServiceID, client.Parser{Kind: client.ParserMemcached, Domain: *domain})
}

// CheckConfig is mccheck's default run against the rig's memcached, from
// its namespace, counting the gets the kernel answered: the Matched of
// every UDP service on memcached's port, whoever attached it.
func (r *Rig) CheckConfig() mccheck.Config {
	cfg := mccheck.DefaultConfig()
	cfg.Netns, cfg.TCP, cfg.UDP = r.NS.Name, Addr, Addr
	cfg.KernelAnswered = func() (uint64, error) {
		svcs, err := r.stats.Services()
		if err != nil {
			return 0, err
		}
		var matched uint64
		for _, s := range svcs {
			if s.Protocol != syscall.IPPROTO_UDP || s.Port != Addr.Port() {
				continue
			}
			st, err := r.stats.ServiceStats(s.ServiceID)
			if err != nil {
				return 0, err
			}
			matched += st.Matched
		}
		return matched, nil
	}
	return cfg
}

// Close stops memcached and santad and removes the namespace and pins.
func (r *Rig) Close() error {
	var errs []error
	for _, c := range []*client.Client{r.Client, r.stats} {
		if c != nil {
			c.Close()
		}
	}
	if r.mc != nil {
		errs = append(errs, r.mc.Stop())
	}
	if r.Santad != nil {
		errs = append(errs, r.Santad.Close())
	}
	if r.NS != nil {
		errs = append(errs, r.NS.Delete())
	}
	return errors.Join(errs...)
}
