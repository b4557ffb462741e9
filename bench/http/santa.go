package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/rule"
)

// offload is Santa on nginx's own listening socket of the santa port: for
// each file, wrk's exact request is answered with nginx's exact reply to
// it, learnt from nginx, as the paper's extended nginx installs its rule.
type offload struct {
	d   *datapath.Datapath
	svc model.ServiceID
}

func startOffload(c config) (*offload, error) {
	port := ports["santa"]
	fd, err := listenerOf(c.r.ServerNS(), port)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	o := &offload{}
	if o.d, err = datapath.Open(datapath.Options{NoPin: true, MaxRules: 1024, MaxServices: 16}); err != nil {
		return nil, err
	}
	if o.svc, err = o.d.AddSocket(fd); err != nil {
		o.d.Close()
		return nil, err
	}
	for _, size := range c.sizes {
		req := wrkRequest(port, size)
		reply, err := nginxReply(c.r, port, req)
		if err == nil && len(reply) > rule.MaxTCPReply {
			err = fmt.Errorf("nginx's reply for %d B is %d B, above Santa's TCP limit %d", size, len(reply), rule.MaxTCPReply)
		}
		if err == nil {
			_, err = o.d.AddRule(o.svc, rule.Rule{Condition: rule.Condition{Pattern: req},
				Processors: []rule.Processor{rule.Put(0, reply)}, ReplyLen: uint16(len(reply))})
		}
		if err != nil {
			o.d.Close()
			return nil, err
		}
	}
	fmt.Fprintf(os.Stderr, "  santa: nginx's listener on port %d taken over, %d rules\n", port, len(c.sizes))
	return o, nil
}

// listenerOf is a copy of the server's listening socket on port.
func listenerOf(ns string, port int) (int, error) {
	found, err := procsock.ListeningTCP(netns.Named(ns), uint16(port), netip.MustParseAddr(rig.ServerIPv4))
	if err != nil {
		return -1, err
	}
	if len(found) != 1 {
		return -1, fmt.Errorf("%d listening sockets on port %d, want 1", len(found), port)
	}
	pid, n, err := procsock.Holder(found[0].Inode)
	if err != nil {
		return -1, err
	}
	return procsock.TakeFD(pid, n)
}

// wrkRequest is the request wrk sends for the file of size bytes (wrk.lua's
// wrk.format: request line, Host with the port, blank line).
func wrkRequest(port, size int) []byte {
	return fmt.Appendf(nil, "GET /%d.bin HTTP/1.1\r\nHost: %s:%d\r\n\r\n", size, rig.ServerIPv4, port)
}

// nginxReply is nginx's reply to req, every byte of it (status line,
// headers, body).
func nginxReply(r rig.Rig, port int, req []byte) ([]byte, error) {
	conn, err := r.Dial("tcp", port)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(req); err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(conn, &raw)), nil)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("nginx answered %q with %s", req, resp.Status)
	}
	return raw.Bytes(), err
}

// answered is how many requests Santa has answered so far.
func (o *offload) answered() (uint64, error) {
	st, err := o.d.ServiceStats(o.svc)
	return st.Matched, err
}

// programCosts runs f with the kernel's BPF run-time statistics on and
// returns the verdict's and the reply program's µs per run meanwhile
// (kernel.bpf_stats_enabled; it adds tens of ns per run).
func (o *offload) programCosts(f func() error) ([2]float64, error) {
	var costs [2]float64
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return costs, err
	}
	defer stats.Close()
	verdict, reply := o.d.TCPPrograms()
	progs := []*ebpf.Program{verdict, reply}
	var before [2]*ebpf.ProgramStats
	for i, p := range progs {
		if before[i], err = p.Stats(); err != nil {
			return costs, err
		}
	}
	if err := f(); err != nil {
		return costs, err
	}
	for i, p := range progs {
		after, err := p.Stats()
		if err != nil {
			return costs, err
		}
		if n := after.RunCount - before[i].RunCount; n > 0 {
			costs[i] = (after.Runtime - before[i].Runtime).Seconds() * 1e6 / float64(n)
		}
	}
	return costs, nil
}

func (o *offload) close() { o.d.Close() }
