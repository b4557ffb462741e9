package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/internal/rules"
)

// serverSockets returns copies (pidfd_getfd) of every UDP socket bound to
// addr:port in the network namespace at nsPath, from whichever process
// holds it: the application's own sockets, which Santa's rules attach to.
func serverSockets(nsPath string, addr netip.Addr, port uint16) ([]int, error) {
	sockets, err := procsock.BoundUDP(nsPath, port, addr)
	if err != nil {
		return nil, err
	}
	if len(sockets) == 0 {
		return nil, fmt.Errorf("no UDP socket bound to %v", netip.AddrPortFrom(addr, port))
	}
	var fds []int
	for _, s := range sockets {
		pid, n, err := procsock.Holder(s.Inode)
		var fd int
		if err == nil {
			fd, err = procsock.TakeFD(pid, n)
		}
		if err != nil {
			closeAll(fds)
			return nil, err
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// captureReplies asks the server (from conn, in the client namespace) for
// every name in names, with transaction id 0, and returns its replies: the
// bytes Santa's rules will answer with. A window of queries is in flight.
func captureReplies(conn *net.UDPConn, names []int) ([][]byte, error) {
	const window = 64
	replies := make([][]byte, len(names))
	buf := make([]byte, 65536)
	for start := 0; start < len(names); start += window {
		batch := names[start:min(len(names), start+window)]
		for try := 0; ; try++ {
			missing := 0
			for i, n := range batch {
				if replies[start+i] == nil {
					q := query(uint16(i), n)
					if _, err := conn.Write(q); err != nil {
						return nil, err
					}
					missing++
				}
			}
			if missing == 0 {
				break
			}
			if try == 5 {
				return nil, fmt.Errorf("no reply to %d queries after 5 tries", missing)
			}
			conn.SetReadDeadline(time.Now().Add(time.Second))
			for range missing {
				k, err := conn.Read(buf)
				if err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						break
					}
					return nil, err
				}
				if k < 12 {
					continue
				}
				i := int(binary.BigEndian.Uint16(buf))
				if i < len(batch) && replies[start+i] == nil {
					r := append([]byte(nil), buf[:k]...)
					r[0], r[1] = 0, 0
					replies[start+i] = r
				}
			}
		}
	}
	return replies, nil
}

// offloadRule answers the query for name i with reply (transaction id 0):
// the condition is the query from byte 2 on, the reply its template with
// the request's transaction id copied in.
func offloadRule(i int, reply []byte) rules.Rule {
	q := query(0, i)
	return rules.Rule{
		Condition:  rules.Condition{Offset: 2, Pattern: q[2:]},
		Processors: []rules.Processor{rules.Put(2, reply[2:]), rules.Copy(0, 2, 0)},
		ReplyLen:   uint16(len(reply)),
	}
}

// offloader keeps the top n names of the zone offloaded to Santa on the
// server's sockets (fds: copies, which the caller keeps open): rules for names 0..n-1 on each, XDP attached to the
// server veth while n > 0.
type offloader struct {
	c        config
	d        *datapath.Datapath
	svcs     []datapath.ServiceID
	replies  [][]byte
	ids      [][]datapath.RuleID // per service, rule of name i at i
	attached bool
}

func newOffloader(c config, fds []int, replies [][]byte) (*offloader, error) {
	maxRules := uint32(1024)
	for maxRules < uint32(2*len(fds)*len(replies)) {
		maxRules <<= 1
	}
	o := &offloader{c: c, replies: replies}
	var err error
	if o.d, err = datapath.Open(datapath.Options{NoPin: true, MaxRules: maxRules, MaxServices: 16}); err != nil {
		o.close()
		return nil, err
	}
	for _, fd := range fds {
		svc, err := o.d.AddService(fd)
		if err != nil {
			o.close()
			return nil, err
		}
		o.svcs = append(o.svcs, svc)
		o.ids = append(o.ids, nil)
	}
	fmt.Fprintf(os.Stderr, "  santa: %d server socket(s) taken over\n", len(fds))
	return o, nil
}

// set offloads exactly the top n names: the sets are nested, so it adds or
// deletes only the difference.
func (o *offloader) set(n int) error {
	for i, svc := range o.svcs {
		have := len(o.ids[i])
		switch {
		case n > have:
			rs := make([]rules.Rule, 0, n-have)
			for k := have; k < n; k++ {
				rs = append(rs, offloadRule(k, o.replies[k]))
			}
			ids, err := o.d.AddRules(svc, rs)
			if err != nil {
				return err
			}
			o.ids[i] = append(o.ids[i], ids...)
		case n < have:
			if err := o.d.DeleteRules(o.ids[i][n:]); err != nil {
				return err
			}
			o.ids[i] = o.ids[i][:n]
		}
	}
	switch {
	case n > 0 && !o.attached:
		if err := rig.InNetns(o.c.r.ServerNS(), func() error {
			att, err := o.d.Attach(o.c.r.ServerDev())
			if err == nil && att.XDP != datapath.XDPNative {
				err = fmt.Errorf("XDP attached in %s mode, not native", att.XDP)
			}
			return err
		}); err != nil {
			return err
		}
		o.attached = true
	case n == 0 && o.attached:
		if err := o.d.Detach(o.c.r.ServerDev()); err != nil {
			return err
		}
		o.attached = false
	}
	time.Sleep(50 * time.Millisecond) // let the change settle before a run
	return nil
}

// answered is how many requests Santa has answered on all the sockets.
func (o *offloader) answered() (uint64, error) {
	var sum uint64
	for _, svc := range o.svcs {
		st, err := o.d.ServiceStats(svc)
		if err != nil {
			return 0, err
		}
		sum += st.Matched
	}
	return sum, nil
}

func (o *offloader) close() {
	if o.d != nil {
		if o.attached {
			o.d.Detach(o.c.r.ServerDev())
		}
		o.d.Close()
	}
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
