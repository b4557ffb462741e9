package dataplane

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/rule"
)

// XDP verdicts.
const (
	XDPDrop = 1
	XDPPass = 2
	XDPTX   = 3
)

// Client is the source of every benchmark request.
var Client = netip.MustParseAddrPort("127.0.0.2:40000")

// SetOptions describe one rule set: its own Datapath with one service (a UDP
// socket on 127.0.0.1) holding Rules DNS rules with Size-byte replies.
type SetOptions struct {
	Rules int
	Size  int
	Batch int              // rules per AddRules call (default 50,000)
	Names func(int) string // default pkttest.Name
	// MaxRules of the Datapath; default: twice Rules rounded up to a power
	// of two, at least 1024 (1M rules: 1<<21).
	MaxRules uint32
	// Progress, if set, is told after each AddRules batch.
	Progress func(done int, took time.Duration)
}

// Set is an installed rule set.
type Set struct {
	Opts    SetOptions
	D       *datapath.Datapath
	Conn    *net.UDPConn
	Svc     model.ServiceID
	Addr    netip.AddrPort // the service socket
	NoSock  netip.AddrPort // a port on 127.0.0.1 with no socket
	Install time.Duration  // sum of the AddRules calls
	Build   time.Duration  // generating the rules in Go (not install)
}

// OpenSet opens a Datapath (unpinned) and installs the rule set.
func OpenSet(o SetOptions) (*Set, error) {
	if o.Batch <= 0 {
		o.Batch = 50000
	}
	if o.Names == nil {
		o.Names = pkttest.Name
	}
	if o.MaxRules == 0 {
		o.MaxRules = max(1024, uint32(1)<<bits.Len(uint(2*o.Rules-1)))
	}
	d, err := datapath.Open(datapath.Options{NoPin: true, MaxRules: o.MaxRules, MaxServices: 16})
	if err != nil {
		return nil, err
	}
	s := &Set{Opts: o, D: d}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if s.Conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		return nil, err
	}
	s.Addr = s.Conn.LocalAddr().(*net.UDPAddr).AddrPort()
	raw, err := s.Conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var aerr error
	if err := raw.Control(func(fd uintptr) { s.Svc, aerr = d.AddSocket(int(fd)) }); err != nil {
		return nil, err
	}
	if aerr != nil {
		return nil, aerr
	}
	if s.NoSock, err = freePort(); err != nil {
		return nil, err
	}
	for start := 0; start < o.Rules; start += o.Batch {
		t0 := time.Now()
		batch := make([]rule.Rule, 0, min(o.Batch, o.Rules-start))
		for n := start; n < min(start+o.Batch, o.Rules); n++ {
			r, err := pkttest.SizedDNSRule(o.Names(n), o.Size)
			if err != nil {
				return nil, err
			}
			batch = append(batch, r)
		}
		t1 := time.Now()
		if _, err := d.AddRules(s.Svc, batch); err != nil {
			return nil, fmt.Errorf("installing rules %d..%d: %w", start, start+len(batch), err)
		}
		took := time.Since(t1)
		s.Build += t1.Sub(t0)
		s.Install += took
		if o.Progress != nil {
			o.Progress(start+len(batch), took)
		}
	}
	ok = true
	return s, nil
}

// freePort finds a UDP port on 127.0.0.1 that nothing listens on.
func freePort() (netip.AddrPort, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return netip.AddrPort{}, err
	}
	a := c.LocalAddr().(*net.UDPAddr).AddrPort()
	c.Close()
	return a, nil
}

// Close releases the Datapath and the socket.
func (s *Set) Close() {
	if s.Conn != nil {
		s.Conn.Close()
	}
	if s.D != nil {
		s.D.Close()
	}
}

// Prog is the XDP program under test.
func (s *Set) Prog() *ebpf.Program { return s.D.XDPProgram() }

// Query is a request frame for name n of the set (installed or not).
func (s *Set) Query(n int, txid uint16) []byte {
	return UDP4Frame(Client, s.Addr, pkttest.DNSQuery(txid, s.Opts.Names(n)))
}

// HotSample is a fixed random sample of up to 1024 installed name numbers
// (with repetition when the set is smaller), in a fixed order.
func (s *Set) HotSample(rng *rand.Rand) []int {
	out := make([]int, 1024)
	if s.Opts.Rules >= len(out) {
		perm := rng.Perm(s.Opts.Rules)
		copy(out, perm)
		return out
	}
	for i := range out {
		out[i] = i % s.Opts.Rules
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Check runs one query for an installed name and one for a missing name
// and compares the results with what the rule says.
func (s *Set) Check() error {
	n := s.Opts.Rules - 1
	txid := uint16(0xbeef)
	in := s.Query(n, txid)
	opts := ebpf.RunOptions{Data: in, DataOut: make([]byte, 4096)}
	ret, err := s.Prog().Run(&opts)
	if err != nil {
		return err
	}
	if ret != XDPTX {
		return fmt.Errorf("installed name %q: verdict %d, want XDP_TX", s.Opts.Names(n), ret)
	}
	want, err := pkttest.SizedDNSReply(s.Opts.Names(n), s.Opts.Size)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint16(want, txid)
	wantFrame := UDP4Frame(s.Addr, Client, want)
	got := opts.DataOut
	// Headers the data plane rewrites differently from our builder (IP id,
	// DF, TTL and the IP checksum) are not compared; payload and ports are.
	if len(got) != len(wantFrame) || !bytes.Equal(got[42:], wantFrame[42:]) ||
		!bytes.Equal(got[34:38], wantFrame[34:38]) {
		return fmt.Errorf("reply for %q differs:\n got %x\nwant %x", s.Opts.Names(n), got, wantFrame)
	}
	if ret, _, err := s.Prog().Benchmark(s.Query(s.Opts.Rules+12345, 1), 1, nil); err != nil || ret != XDPPass {
		return fmt.Errorf("missing name: verdict %d (%v), want XDP_PASS", ret, err)
	}
	if ret, _, err := s.Prog().Benchmark(UDP4Frame(Client, s.NoSock, pkttest.DNSQuery(1, s.Opts.Names(0))), 1, nil); err != nil || ret != XDPPass {
		return fmt.Errorf("no socket: verdict %d (%v), want XDP_PASS", ret, err)
	}
	return nil
}

// KernelMemory sums the kernel's own memory accounting (memlock) of the
// program's maps, by map name.
func (s *Set) KernelMemory() (map[string]uint64, error) {
	info, err := s.Prog().Info()
	if err != nil {
		return nil, err
	}
	ids, ok := info.MapIDs()
	if !ok {
		return nil, fmt.Errorf("map ids not available")
	}
	out := map[string]uint64{}
	for _, id := range ids {
		if err := addMemory(out, id, ""); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// addMemory adds the memlock of map id to out[name] (its own name if name
// is empty), and that of the maps in it if it is a map of maps: the rule
// bodies' chunks.
func addMemory(out map[string]uint64, id ebpf.MapID, name string) error {
	m, err := ebpf.NewMapFromID(id)
	if err != nil {
		return err
	}
	defer m.Close()
	mi, err := m.Info()
	if err != nil {
		return err
	}
	if name == "" {
		name = mi.Name
	}
	if ml, ok := mi.Memlock(); ok {
		out[name] += ml
	}
	if mi.Type != ebpf.ArrayOfMaps {
		return nil
	}
	var key, inner uint32
	entries := m.Iterate()
	for entries.Next(&key, &inner) {
		if err := addMemory(out, ebpf.MapID(inner), name); err != nil {
			return err
		}
	}
	return entries.Err()
}

// Mixes are the request mixes of Cells, in report order.
var Mixes = []string{"hot", "uniform", "miss", "nosocket"}

// Cells are the set's measured configurations, named
// rules=<n>/reply=<size>/mix=<mix>:
//   - hot: cycling through a fixed sample of 1024 installed names;
//   - uniform: names drawn uniformly from the whole set (cache-miss bound);
//   - miss: names that are not installed (XDP_PASS after the index lookup);
//   - nosocket: the same queries to a port with no socket (parse and socket
//     lookup only).
func (s *Set) Cells(rng *rand.Rand) []*Cell {
	n := s.Opts.Rules
	sample := s.HotSample(rng)
	hot := make([][]byte, len(sample))
	for i, x := range sample {
		hot[i] = s.Query(x, uint16(rng.Uint32()))
	}
	next := 0
	prefix := fmt.Sprintf("rules=%s/reply=%d/mix=", Human(n), s.Opts.Size)
	gen := func(pick func(rng *rand.Rand) []byte) func(*rand.Rand, int) [][]byte {
		return func(rng *rand.Rand, k int) [][]byte {
			out := make([][]byte, k)
			for i := range out {
				out[i] = pick(rng)
			}
			return out
		}
	}
	return []*Cell{
		{Name: prefix + "hot", Prog: s.Prog(), Want: XDPTX, Frames: gen(func(*rand.Rand) []byte {
			f := hot[next%len(hot)]
			next++
			return f
		})},
		{Name: prefix + "uniform", Prog: s.Prog(), Want: XDPTX, Frames: gen(func(rng *rand.Rand) []byte {
			return s.Query(rng.IntN(n), uint16(rng.Uint32()))
		})},
		{Name: prefix + "miss", Prog: s.Prog(), Want: XDPPass, Frames: gen(func(rng *rand.Rand) []byte {
			return s.Query(n+rng.IntN(max(n, 1024)), uint16(rng.Uint32()))
		})},
		{Name: prefix + "nosocket", Prog: s.Prog(), Want: XDPPass, Frames: gen(func(rng *rand.Rand) []byte {
			return UDP4Frame(Client, s.NoSock, pkttest.DNSQuery(uint16(rng.Uint32()), s.Opts.Names(sample[rng.IntN(len(sample))])))
		})},
	}
}
