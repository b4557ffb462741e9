package dnstest

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
)

// Zone is a zone the Server serves. The SOA record comes from Serial.
type Zone struct {
	Apex    string
	Serial  uint32
	Records []RR
}

// Server is an authoritative server for tests, on a UDP socket: it answers
// like a real one in what the agent looks at (AA, NXDOMAIN and NODATA with
// the SOA in the authority section, REFUSED outside its zones, referrals
// below its delegations, CNAMEs followed into its zones, NS records and
// their addresses with positive answers), and can be told to drop
// queries or rotate RRsets.
type Server struct {
	conns   []*net.UDPConn
	tcp     net.Listener
	serving sync.WaitGroup // the sockets' goroutines

	mu       sync.Mutex
	zones    map[string]Zone // by apex, lower case, without the final dot
	before   func(*dnsmsg.Message)
	drop     func(*dnsmsg.Message) bool
	dropUDP  func(*dnsmsg.Message) bool
	tcpConns map[net.Conn]bool
	tcpAsked int
	rotate   bool
	rotated  map[string]int // answers given, by name, when rotating
	queries  []string       // names asked, in order
}

// NewServer serves on a new socket bound to addr ("127.0.0.1:0") until the
// test ends.
func NewServer(t testing.TB, addr string) *Server { return NewReusePortServer(t, addr, 1) }

// NewReusePortServer serves on n SO_REUSEPORT sockets bound to addr (port
// 0: one chosen for the first), as a server with n threads does, and on
// TCP at the same address.
func NewReusePortServer(t testing.TB, addr string, n int) *Server {
	s := &Server{zones: map[string]Zone{}, rotated: map[string]int{}, tcpConns: map[net.Conn]bool{}}
	conns, l, err := listenUDPAndTCP(addr, n)
	for try := 0; err != nil && strings.HasSuffix(addr, ":0") && try < 20; try++ {
		// The port the kernel chose for UDP can be taken on TCP by another
		// test: choose again.
		conns, l, err = listenUDPAndTCP(addr, n)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.conns, s.tcp = conns, l
	for _, conn := range conns {
		s.serving.Go(func() { s.serve(conn) })
	}
	s.serving.Go(func() { s.serveTCP(l) })
	t.Cleanup(func() {
		s.Close()
		s.serving.Wait()
	})
	return s
}

// Open serves on one more SO_REUSEPORT UDP socket bound to the server's
// address, as a server starting another thread does, and returns it.
func (s *Server) Open(t testing.TB) *net.UDPConn {
	conns, err := listenUDP(s.Addr().String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	s.conns = append(s.conns, conns[0])
	s.serving.Go(func() { s.serve(conns[0]) })
	return conns[0]
}

// listenUDPAndTCP opens n SO_REUSEPORT UDP sockets on addr (port 0: one
// chosen for the first) and a TCP listener on the same address; on an
// error it closes what it opened.
func listenUDPAndTCP(addr string, n int) ([]*net.UDPConn, net.Listener, error) {
	conns, err := listenUDP(addr, n)
	if err != nil {
		return nil, nil, err
	}
	l, err := net.Listen("tcp", conns[0].LocalAddr().String())
	if err != nil {
		for _, c := range conns {
			c.Close()
		}
		return nil, nil, err
	}
	return conns, l, nil
}

// listenUDP opens n SO_REUSEPORT UDP sockets on addr (port 0: one chosen
// for the first); on an error it closes what it opened.
func listenUDP(addr string, n int) ([]*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return err
	}}
	var conns []*net.UDPConn
	for range n {
		c, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conn := c.(*net.UDPConn)
		addr = conn.LocalAddr().String()
		conns = append(conns, conn)
	}
	return conns, nil
}

// Close stops serving, as a server that ends: its sockets close.
func (s *Server) Close() {
	for _, c := range s.conns {
		c.Close()
	}
	s.CloseTCP()
}

// CloseTCP stops serving TCP: connections are refused, open ones closed.
func (s *Server) CloseTCP() {
	s.tcp.Close()
	s.CloseTCPConns()
}

// CloseTCPConns closes the open TCP connections, as a server's idle
// timeout does; new ones are taken.
func (s *Server) CloseTCPConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.tcpConns {
		c.Close()
	}
}

// DropUDP makes the server ignore the queries over UDP f returns true for
// (nil: none), as an overloaded server's full socket does.
func (s *Server) DropUDP(f func(*dnsmsg.Message) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropUDP = f
}

// TCPAsked is the number of queries received over TCP so far.
func (s *Server) TCPAsked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tcpAsked
}

// Addr is the server's address.
func (s *Server) Addr() netip.AddrPort { return s.conns[0].LocalAddr().(*net.UDPAddr).AddrPort() }

// SetZone serves z, replacing the zone of the same apex.
func (s *Server) SetZone(z Zone) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zones[key(z.Apex)] = z
}

// Drop makes the server ignore the queries f returns true for (nil: none).
func (s *Server) Drop(f func(*dnsmsg.Message) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop = f
}

// BeforeAnswer has f called with each query before it is answered (nil:
// none), without the server's lock: f may change the zones.
func (s *Server) BeforeAnswer(f func(*dnsmsg.Message)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = f
}

// Rotate makes the server rotate RRsets of several records by one at each
// answer for their name, as BIND's rrset-order cyclic.
func (s *Server) Rotate(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate = on
}

// Asked is the names of the queries received so far, in order.
func (s *Server) Asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.queries...)
}

func key(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

func (s *Server) serve(conn *net.UDPConn) {
	buf := make([]byte, 65536)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if reply := s.answer(buf[:n], false); reply != nil {
			conn.WriteToUDPAddrPort(reply, from)
		}
	}
}

// serveTCP answers each connection's queries in turn (pipelined queries
// wait in the stream).
func (s *Server) serveTCP(l net.Listener) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.tcpConns[c] = true
		s.mu.Unlock()
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer func() {
				s.mu.Lock()
				delete(s.tcpConns, c)
				s.mu.Unlock()
				c.Close()
			}()
			var head [2]byte
			for {
				if _, err := io.ReadFull(c, head[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(head[:]))
				if _, err := io.ReadFull(c, q); err != nil {
					return
				}
				if reply := s.answer(q, true); reply != nil {
					c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(reply))), reply...))
				}
			}
		}()
	}
}

func (s *Server) answer(q []byte, tcp bool) []byte {
	m, err := dnsmsg.Parse(q)
	if err != nil || len(m.Question) != 1 {
		return nil
	}
	s.mu.Lock()
	before := s.before
	s.mu.Unlock()
	if before != nil {
		before(m)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = append(s.queries, m.Question[0].Name.String())
	if tcp {
		s.tcpAsked++
	}
	if s.drop != nil && s.drop(m) || !tcp && s.dropUDP != nil && s.dropUDP(m) {
		return nil
	}
	question := q[dnsmsg.HeaderLen : dnsmsg.HeaderLen+len(m.Question[0].Name)+4]
	flags, answer, authority, additional := s.lookup(m.Question[0])
	flags |= QR | m.Flags&RD
	for _, rr := range m.Additional {
		if rr.Type == dnsmsg.TypeOPT {
			additional = append(additional, OPT(1232))
		}
	}
	r := make([]byte, dnsmsg.HeaderLen)
	binary.BigEndian.PutUint16(r[0:], m.ID)
	binary.BigEndian.PutUint16(r[2:], flags)
	binary.BigEndian.PutUint16(r[4:], 1)
	binary.BigEndian.PutUint16(r[6:], uint16(len(answer)))
	binary.BigEndian.PutUint16(r[8:], uint16(len(authority)))
	binary.BigEndian.PutUint16(r[10:], uint16(len(additional)))
	r = append(r, question...)
	for _, rr := range append(append(answer, authority...), additional...) {
		r = AppendRR(r, rr)
	}
	return r
}

// lookup answers a question: the flags (AA, rcode) and the records of
// the answer, authority and additional sections. A name at or below a
// delegation (NS records below the zone's apex) is answered with a
// referral: AA clear, the delegation's NS records and their addresses. A
// CNAME is followed into any zone the server serves, as BIND does: the
// end of the chain gives the rcode and the other sections (RFC 6604:
// NXDOMAIN or NODATA with the SOA of the target's zone). A positive
// answer has the zone's NS records in the authority section and their
// addresses in the additional section, as BIND's minimal-responses no.
func (s *Server) lookup(q dnsmsg.Question) (flags uint16, answer, authority, additional []RR) {
	name := key(q.Name.String())
	z, ok := s.zoneOf(name)
	if !ok {
		return 5, nil, nil, nil // REFUSED
	}
	if cut := z.delegation(name); cut != nil {
		return 0, nil, cut, s.addresses(z, cut)
	}
	records := append([]RR{SOA(z.Apex, z.Serial)}, z.Records...)
	exists := false
	for _, rr := range records {
		if key(rr.Name) != name {
			continue
		}
		exists = true
		switch {
		case rr.Type == q.Type:
			answer = append(answer, rr)
		case rr.Type == TypeCNAME:
			f, more, auth, add := s.lookup(dnsmsg.Question{Name: Name(dnsmsg.Name(rr.Data).String()), Type: q.Type, Class: q.Class})
			answer = append(append(answer, rr), more...)
			if f&0xf == 5 {
				return AA, answer, nil, nil // a target outside the server's zones: the CNAME alone
			}
			return AA | f&0xf, answer, auth, add
		}
	}
	if s.rotate && len(answer) > 1 {
		k := s.rotated[name] % len(answer)
		s.rotated[name]++
		answer = append(answer[k:], answer[:k]...)
	}
	switch {
	case len(answer) > 0:
		ns := z.records(key(z.Apex), TypeNS)
		return AA, answer, ns, s.addresses(z, ns)
	case exists:
		return AA, nil, []RR{SOA(z.Apex, z.Serial)}, nil
	}
	return AA | 3, nil, []RR{SOA(z.Apex, z.Serial)}, nil // NXDOMAIN
}

// records is z's records of name (a key) of the types given.
func (z Zone) records(name string, types ...uint16) []RR {
	var rrs []RR
	for _, rr := range z.Records {
		if key(rr.Name) == name && slices.Contains(types, rr.Type) {
			rrs = append(rrs, rr)
		}
	}
	return rrs
}

// delegation is the NS records of the zone cut at or above name (a key
// in z) below z's apex, nil if there is none.
func (z Zone) delegation(name string) []RR {
	for n := name; n != key(z.Apex); _, n, _ = strings.Cut(n, ".") {
		if ns := z.records(n, TypeNS); ns != nil {
			return ns
		}
	}
	return nil
}

// addresses is the A and AAAA records of the targets of ns, for the
// additional section: z's own (glue below one of its delegations
// included), else the authoritative ones of the zone served that holds
// the target (BIND looks in every zone it serves).
func (s *Server) addresses(z Zone, ns []RR) []RR {
	var add []RR
	for _, rr := range ns {
		target := key(dnsmsg.Name(rr.Data).String())
		found := z.records(target, TypeA, TypeAAAA)
		if tz, ok := s.zoneOf(target); found == nil && ok && tz.delegation(target) == nil {
			found = tz.records(target, TypeA, TypeAAAA)
		}
		add = append(add, found...)
	}
	return add
}

// zoneOf is the zone of the longest apex name is in.
func (s *Server) zoneOf(name string) (Zone, bool) {
	for n := name; ; {
		if z, ok := s.zones[n]; ok {
			return z, true
		}
		if n == "" {
			return Zone{}, false
		}
		_, n, _ = strings.Cut(n, ".")
	}
}

// Conns is the server's sockets, for tests that attach them.
func (s *Server) Conns() []*net.UDPConn { return s.conns }
