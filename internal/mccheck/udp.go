package mccheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/santa-offload/santa/internal/netns"
)

// maxRequestID: a UDP socket sends at most this many requests, each with
// its own request id, then a new socket (a new port) takes over, so that
// a late reply is never taken for a later request's.
const maxRequestID = 60000

// udpSock is a client's UDP socket to memcached.
type udpSock struct {
	nsPath string
	dst    netip.AddrPort
	conn   *net.UDPConn
	next   uint16 // the next request id
	buf    []byte
}

// open opens a new socket in the clients' namespace (closing the last).
func (s *udpSock) open() error {
	s.close()
	s.next, s.buf = 0, make([]byte, 64<<10)
	return netns.Run(s.nsPath, func() (err error) {
		s.conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.dst))
		return err
	})
}

func (s *udpSock) close() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// exhausted: every request id of the socket has been used.
func (s *udpSock) exhausted() bool { return s.next >= maxRequestID }

// send sends payload with memcached's 8-byte frame header (request id,
// datagram 0 of 1) and returns the request id.
func (s *udpSock) send(payload []byte) (uint16, error) {
	id := s.next
	s.next++
	_, err := s.conn.Write(append([]byte{byte(id >> 8), byte(id), 0, 0, 0, 1, 0, 0}, payload...))
	return id, err
}

// recv reads one datagram until deadline: its request id and payload;
// timedOut if none came. A datagram not a single-datagram reply is
// returned with ok false.
func (s *udpSock) recv(deadline time.Time) (id uint16, payload []byte, ok, timedOut bool, err error) {
	s.conn.SetReadDeadline(deadline)
	n, err := s.conn.Read(s.buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, nil, false, true, nil
	}
	if err != nil {
		return 0, nil, false, false, err
	}
	b := s.buf[:n]
	if n < 8 {
		return 0, nil, false, false, nil
	}
	id = uint16(b[0])<<8 | uint16(b[1])
	return id, b[8:], string(b[2:6]) == "\x00\x00\x00\x01", false, nil
}

// udpWriter writes its keys over UDP, one request at a time: each
// acknowledged before the next is sent. A key whose write goes
// unanswered is given up (check.go).
type udpWriter struct {
	*worker
	sock udpSock
	g    *gen
	keys []int
}

func (w *udpWriter) run(ctx context.Context) error {
	for ctx.Err() == nil {
		var live []int
		for _, k := range w.keys {
			if !w.g.state[k].retired {
				live = append(live, k)
			}
		}
		if len(live) == 0 || w.budget.take(1) == 0 {
			return nil
		}
		if err := w.write(w.g.next(live[w.rng.IntN(len(live))], true)); err != nil {
			return fmt.Errorf("UDP writer %d: %w", w.id, err)
		}
		w.pause(ctx)
	}
	return nil
}

func (w *udpWriter) write(c *cmd) error {
	if w.sock.exhausted() {
		if err := w.sock.open(); err != nil {
			return err
		}
	}
	w.seq++
	c.seq = w.seq
	rec := write{key: c.key, writer: w.id, seq: c.seq, command: c.line, sent: w.now(), acked: -1}
	w.countWrite(form(c, true))
	id, err := w.sock.send(c.bytes())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(w.cfg.UDPTimeout)
	for {
		got, payload, ok, timedOut, err := w.sock.recv(deadline)
		switch {
		case err != nil:
			return err
		case timedOut:
			w.g.state[c.key].retired = true
			w.log.udpTimeouts++
			w.log.writes = append(w.log.writes, rec)
			return nil
		case got != id:
			continue // a late reply to an earlier request
		case !ok:
			return fmt.Errorf("reply to %q: not a single datagram: % x", c.line, payload)
		}
		line, data, err := readWriteReply(bufio.NewReader(bytes.NewReader(payload)))
		if err != nil {
			return fmt.Errorf("reply to %q: %w", c.line, err)
		}
		rec.acked = w.now()
		w.g.outcome(c, line, data, &rec)
		w.log.writes = append(w.log.writes, rec)
		return nil
	}
}

// udpReader sends single-key gets over UDP, Window of them outstanding.
type udpReader struct {
	*worker
	sock udpSock
}

type pendingGet struct {
	key  int
	sent time.Duration
	at   time.Time // for its timeout
}

func (r *udpReader) run(ctx context.Context) error {
	out := map[uint16]pendingGet{}
	for {
		for len(out) < r.cfg.Window && ctx.Err() == nil && !r.sock.exhausted() && r.budget.take(1) == 1 {
			k := r.rng.IntN(r.cfg.Keys)
			sent, at := r.now(), time.Now()
			id, err := r.sock.send([]byte("get " + r.cfg.Key(k) + "\r\n"))
			if err != nil {
				return fmt.Errorf("UDP reader %d: %w", r.id, err)
			}
			out[id] = pendingGet{key: k, sent: sent, at: at}
		}
		if len(out) == 0 {
			if !r.sock.exhausted() || ctx.Err() != nil {
				return nil // the budget or the time is spent
			}
			if err := r.sock.open(); err != nil {
				return fmt.Errorf("UDP reader %d: %w", r.id, err)
			}
			continue
		}
		oldest := time.Now()
		for _, p := range out {
			if p.at.Before(oldest) {
				oldest = p.at
			}
		}
		id, payload, ok, timedOut, err := r.sock.recv(oldest.Add(r.cfg.UDPTimeout))
		if err != nil {
			return fmt.Errorf("UDP reader %d: %w", r.id, err)
		}
		if timedOut {
			for id, p := range out {
				if time.Since(p.at) >= r.cfg.UDPTimeout {
					r.log.reads = append(r.log.reads, read{key: p.key, via: "udp get", sent: p.sent, recvd: r.now(), outcome: timeout})
					r.log.udpTimeouts++
					delete(out, id)
				}
			}
			continue
		}
		p, mine := out[id]
		if !mine {
			continue // late, after its timeout
		}
		delete(out, id)
		rd := read{key: p.key, via: "udp get", sent: p.sent, recvd: r.now()}
		rep, err := readGetReply(bufio.NewReader(bytes.NewReader(payload)), r.cfg.Key(p.key), false)
		switch {
		case !ok:
			rd.outcome, rd.value = failed, fmt.Sprintf("not a single datagram: %q", payload)
		case err != nil:
			rd.outcome, rd.value = failed, fmt.Sprintf("%v: %q", err, payload)
		default:
			rd.outcome, rd.value = rep.outcome, rep.value
		}
		r.log.reads = append(r.log.reads, rd)
	}
}
