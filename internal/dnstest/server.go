// Package dnstest runs BIND, Knot and NSD from Debian's packages in a
// network namespace for Santa's tests and benchmarks: authoritative for
// two generated zones (see Origin), listening on port 53 of given IPv4
// and IPv6 addresses, with as many worker threads as asked. A server
// reports its pids, edits a zone and reloads it the way its operators do
// (rndc reload, knotc zone-reload, nsd-control reload) and says when the
// reload is complete, restarts, and stops. Knot can also run in its own
// XDP mode on an interface (Config.XDP). Needs root.
package dnstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/santa-offload/santa/internal/dnsload"
	"github.com/santa-offload/santa/internal/netproc"
)

const (
	// ReloadTimeout bounds a reload: the command to the new serial served.
	ReloadTimeout = 30 * time.Second
	askTimeout    = 300 * time.Millisecond // one SOA query
	controlTime   = 30 * time.Second       // rndc, knotc, nsd-control
)

// Config is a server to start.
type Config struct {
	Kind Kind
	// Netns is the `ip netns` name it runs in; its lo must be up (rndc
	// talks to named on 127.0.0.1) and Addrs configured.
	Netns string
	// Dir holds the configuration, zone files, control sockets and the
	// log (server.log); it must exist and stay until Stop.
	Dir string
	// Addrs are where the server listens, port 53: IPv4 and IPv6.
	Addrs []netip.Addr
	// Threads: BIND's -n, Knot's udp-workers, NSD's server-count (0: 1).
	Threads int
	// Names is how many generated names Origin has (Name(0...)).
	Names int
	// Pin, if set, pins the server's threads to CPU.
	Pin bool
	CPU int
	// ReadyTimeout bounds the start (0: netproc.DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// XDP, Knot only: also answer the UDP queries that arrive on this
	// interface of Netns in Knot's XDP mode (AF_XDP; `xdp: listen:
	// XDP@53`), before the kernel's stack sees them. Knot's XDP program
	// takes the interface: nothing else may have XDP attached there
	// while it runs. Knot leaves the program attached when it ends;
	// Stop and Restart detach it.
	XDP string
}

// Server is a running DNS server.
type Server struct {
	c    Config
	argv []string

	mu    sync.Mutex // zones and proc
	zones []*Zone
	proc  *netproc.Proc
}

// Available says why kind k cannot run here (nil: it can): its server or
// control program is missing.
func Available(k Kind) error {
	kd, ok := kinds[k]
	if !ok {
		return fmt.Errorf("unknown DNS server %q", k)
	}
	for _, p := range []string{kd.server, kd.control} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s needs %s (Debian package %s; make bench-deps): %w", k, p, debianPackage[k], err)
		}
	}
	return nil
}

var debianPackage = map[Kind]string{BIND: "bind9", Knot: "knot", NSD: "nsd"}

// Start writes the zones and the configuration into c.Dir, starts the
// server and waits until it answers both zones' SOA on every address.
func Start(c Config) (*Server, error) {
	if err := Available(c.Kind); err != nil {
		return nil, err
	}
	if c.Threads == 0 {
		c.Threads = 1
	}
	switch {
	case len(c.Addrs) == 0:
		return nil, errors.New("dnstest: no address to listen on")
	case c.Threads < 0 || c.Names < 0:
		return nil, fmt.Errorf("dnstest: %d threads, %d names", c.Threads, c.Names)
	case c.XDP != "" && c.Kind != Knot:
		return nil, fmt.Errorf("dnstest: XDP mode is Knot's; %s has none", c.Kind)
	}
	s := &Server{c: c, zones: newZones(c.Names, c.Addrs)}
	for _, z := range s.zones {
		if err := z.WriteFile(zoneFile(c.Dir, z.Origin)); err != nil {
			return nil, err
		}
	}
	var err error
	if s.argv, err = kinds[c.Kind].config(c); err != nil {
		return nil, err
	}
	return s, s.start()
}

func (s *Server) start() error {
	p, err := netproc.Start(netproc.Spec{Name: string(s.c.Kind), Argv: s.argv, Netns: s.c.Netns,
		LogPath: filepath.Join(s.c.Dir, "server.log"), Pin: s.c.Pin, CPU: s.c.CPU,
		Ready: s.serving, ReadyTimeout: s.c.ReadyTimeout})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	if s.c.XDP != "" {
		if err := nativeXDP(s.c.Netns, s.c.XDP); err != nil {
			return errors.Join(err, s.Stop())
		}
	}
	return nil
}

// Kind is the server's kind.
func (s *Server) Kind() Kind { return s.c.Kind }

// Addrs are the addresses it listens on, port 53.
func (s *Server) Addrs() []netip.Addr { return s.c.Addrs }

// Pid is the server's first process: named's, knotd's; NSD's, which
// forks xfrd's process and its servers.
func (s *Server) Pid() int { return s.current().Pid() }

// Pids are every process of the server now (NSD's servers change at
// each reload).
func (s *Server) Pids() []int { return s.current().Pids() }

func (s *Server) current() *netproc.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// Zone is the zone with origin (Origin or SubOrigin), as the server was
// last given it.
func (s *Server) Zone(origin string) *Zone {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, z := range s.zones {
		if z.Origin == origin {
			return z
		}
	}
	return nil
}

// Update edits the zone with origin, bumps its serial, writes its file and
// reloads it with the server's control program, then waits until the
// server answers the new serial on every address and, for NSD, until its
// old server processes have ended (they answer the old data, from the
// same sockets, for a few ms after new ones answer the new serial): the
// time it returns is when the reload was seen complete. Then the server
// answers the edited data (a zone is swapped whole).
func (s *Server) Update(origin string, edit func(*Zone)) (time.Time, error) {
	z := s.Zone(origin)
	if z == nil {
		return time.Time{}, fmt.Errorf("dnstest: no zone %q", origin)
	}
	before := s.Pids()
	s.mu.Lock()
	edit(z)
	z.Serial++
	err := z.WriteFile(zoneFile(s.c.Dir, z.Origin))
	s.mu.Unlock()
	if err != nil {
		return time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlTime)
	defer cancel()
	argv := kinds[s.c.Kind].reload(s.c, strings.TrimSuffix(origin, "."))
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", s.c.Netns}, argv...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return time.Time{}, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	for deadline := time.Now().Add(ReloadTimeout); ; time.Sleep(2 * time.Millisecond) {
		err := s.serving()
		if err == nil && kinds[s.c.Kind].forks {
			err = replaced(before, s.Pids())
		}
		if err == nil {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("dnstest: %s did not serve %s serial %d within %v: %w", s.c.Kind, origin, z.Serial, ReloadTimeout, err)
		}
	}
}

// serving checks that the server answers every zone's current serial on
// every address.
func (s *Server) serving() error {
	s.mu.Lock()
	want := map[string]uint32{}
	for _, z := range s.zones {
		want[z.Origin] = z.Serial
	}
	s.mu.Unlock()
	for _, a := range s.c.Addrs {
		conn, err := s.Dial(a)
		if err != nil {
			return err
		}
		for origin, serial := range want {
			got, err := askSerial(conn, origin)
			if err == nil && got != serial {
				err = fmt.Errorf("serial %d, want %d", got, serial)
			}
			if err != nil {
				conn.Close()
				return fmt.Errorf("%s SOA at %v: %w", origin, a, err)
			}
		}
		conn.Close()
	}
	return nil
}

// replaced checks that a reload that forks new server processes is over:
// the server has as many processes as before it, not the same ones (the
// old ones count until their parent has reaped them).
func replaced(before, now []int) error {
	slices.Sort(before)
	slices.Sort(now)
	if len(now) != len(before) || slices.Equal(now, before) {
		return fmt.Errorf("processes %v, %v before the reload: the old ones still run", now, before)
	}
	return nil
}

// askSerial asks conn for origin's SOA and returns its serial.
func askSerial(conn *net.UDPConn, origin string) (uint32, error) {
	f := dnsload.NewForm(dnsload.Question{Name: origin, Type: dnsload.TypeSOA}, dnsload.Plain)
	conn.SetDeadline(time.Now().Add(askTimeout))
	if _, err := conn.Write(f.Query(0x5e7a)); err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return 0, err
		}
		if n >= 2 && buf[0] == 0x5e && buf[1] == 0x7a {
			return dnsload.SOASerial(buf[:n])
		}
	}
}

// Dial opens a UDP socket in the server's namespace connected to its
// address a, port 53: what the server itself answers, not through an
// interface where Santa may answer first (unless Santa is attached to lo).
func (s *Server) Dial(a netip.Addr) (*net.UDPConn, error) {
	return dnsload.Dial(s.c.Netns, netip.AddrPortFrom(a, 53))
}

// Restart stops the server (SIGTERM to its pid, waiting for every process
// to end) and starts it again with the zones as they are, waiting until
// it serves them. Its pids change.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.start()
}

// Stop stops the server and waits until all its processes have ended,
// then detaches Knot's XDP program if it ran in XDP mode. The caller
// removes Dir.
func (s *Server) Stop() error {
	err := s.current().Stop()
	if s.c.XDP != "" {
		err = errors.Join(err, detachXDP(s.c.Netns, s.c.XDP))
	}
	return err
}

// nativeXDP checks that dev in netns has an XDP program in native mode:
// Knot falls back to the generic mode where the driver has none, and
// that would be another measurement.
func nativeXDP(netns, dev string) error {
	out, err := exec.Command("ip", "-n", netns, "link", "show", "dev", dev).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip link show %s: %w\n%s", dev, err, out)
	}
	if !strings.Contains(string(out), "prog/xdp id") {
		return fmt.Errorf("Knot's XDP mode is not native on %s:\n%s", dev, out)
	}
	return nil
}

// detachXDP removes whatever XDP program is attached to dev in netns.
func detachXDP(netns, dev string) error {
	ctx, cancel := context.WithTimeout(context.Background(), controlTime)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", "-n", netns, "link", "set", "dev", dev, "xdp", "off").CombinedOutput(); err != nil {
		return fmt.Errorf("detaching Knot's XDP program from %s: %w\n%s", dev, err, out)
	}
	return nil
}

// Log is what the server logged so far, over all its starts.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.c.Dir, "server.log"))
	return string(b)
}
