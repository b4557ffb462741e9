package daemon

import (
	"errors"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
)

// A connection is served by one goroutine: requests are read, handled and
// answered one at a time, so replies come in request order, and whatever a
// client sends can only end its own connection.

// maxFDs is the most file descriptors one message can carry (SCM_MAX_FD).
// The control buffer takes them all, so that every one is closed here.
const maxFDs = 253

// session is a connection's state.
type session struct {
	peer    Peer
	hello   bool   // HELLO done
	version uint16 // the protocol version HELLO agreed on
	client  string
	txns    map[uint32]*txn
	lastTxn uint32
}

// Serve answers a connection until the client closes it, it breaks the
// protocol, or the server shuts down.
func (s *Server) Serve(c *net.UnixConn, peer Peer) {
	if !s.track(c) {
		c.Close()
		return
	}
	defer s.untrack(c)
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	if !peer.Admin {
		if quota, answer := s.admitConnection(peer.UID); quota > 0 {
			s.counters.connRefused.WithLabelValues(connQuotaReason).Inc()
			if answer {
				refuseConnection(c, raw, peer.UID, quota)
				s.refused(peer.UID)
			}
			return
		}
		defer s.releaseConnection(peer.UID)
	}
	sess := &session{peer: peer, txns: map[uint32]*txn{}}
	defer s.endAll(sess) // closing the connection aborts its transactions
	log := s.log.With("uid", peer.UID, "pid", peer.PID)
	buf := make([]byte, protocol.MaxMessage+1)
	oob := make([]byte, unix.CmsgSpace(4*maxFDs))
	var out []byte // the last reply's, which the next is encoded into
	for {
		n, fds, err := receive(raw, buf, oob)
		if err != nil || (n == 0 && hungUp(raw)) {
			closeFDs(fds)
			return // closed by either side
		}
		// An empty message is refused like any shorter than a header.
		h, reply, done := s.respond(sess, buf, n, fds)
		closeFDs(fds)
		s.counters.request(h, reply)
		v := sess.replyVersion(h)
		msg, err := protocol.AppendEncode(out, v, h.Seq, reply)
		if err != nil {
			log.Error("encoding a reply", "reply", reply.Type(), "err", err)
			s.counters.failed(errEncode)
			msg, _ = protocol.Encode(v, h.Seq, protocol.Errorf(syscall.EIO, "santad could not encode its reply: %v", err))
		}
		if _, err := c.Write(msg); err != nil {
			return
		}
		out = msg
		if done {
			if e, ok := reply.(*protocol.Error); ok {
				log.Info("closing a connection that broke the protocol", "client", sess.client, "err", e)
			}
			return
		}
	}
}

// respond handles the n-byte datagram in buf and says whether the
// connection must close after the reply. h is the request's header, as far
// as it could be read.
func (s *Server) respond(sess *session, buf []byte, n int, fds []int) (h protocol.Header, reply protocol.Body, done bool) {
	if n > protocol.MaxMessage {
		h, _, _ := protocol.Decode(buf[:protocol.HeaderLen]) // for its seq
		return h, protocol.Errorf(syscall.EMSGSIZE, "message is %d bytes; the limit is %d", n, protocol.MaxMessage), true
	}
	h, req, err := protocol.Decode(buf[:n])
	var bad *protocol.Error
	if err != nil {
		bad = err.(*protocol.Error) // Decode's errors all are
	}
	switch {
	case bad != nil && (bad.Code == syscall.EPROTO || bad.Code == syscall.EMSGSIZE):
		return h, bad, true
	case h.Type.IsReply():
		return h, protocol.Errorf(syscall.EPROTO, "%v is a reply, not a request", h.Type), true
	case !sess.hello && h.Type != protocol.TypeHello:
		return h, protocol.Errorf(syscall.EPROTO, "the first request must be HELLO, not %v", h.Type), true
	case sess.hello && h.Version != sess.version:
		return h, protocol.Errorf(syscall.EPROTO, "%v in protocol version %d; HELLO agreed on version %d", h.Type, h.Version, sess.version), true
	case bad != nil:
		return h, bad, false
	}
	return h, s.handle(sess, req, fds), false
}

// replyVersion is the version of the reply to a request with header h: the
// one HELLO agreed on (the HELLO reply is the first message in it);
// before, the request's own, if this side speaks it, which its client
// reads.
func (sess *session) replyVersion(h protocol.Header) uint16 {
	switch {
	case sess.hello:
		return sess.version
	case protocol.Speaks(h.Version):
		return h.Version
	}
	return protocol.MinVersion
}

// receive reads one datagram into buf with the descriptors it carries,
// which the caller closes whatever comes of it. MSG_TRUNC makes n the
// datagram's real length, so that one longer than buf is told from one
// that fills it. Descriptors that did not fit oob (MSG_CTRUNC) the kernel
// closed itself; fds are those it passed.
func receive(raw syscall.RawConn, buf, oob []byte) (n int, fds []int, err error) {
	var oobn int
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_TRUNC|unix.MSG_CMSG_CLOEXEC)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	if oobn > 0 {
		fds = rights(oob[:oobn])
	}
	return n, fds, err
}

// hungUp tells the end of the connection from an empty message: on a
// SOCK_SEQPACKET socket recvmsg returns 0 bytes for both. It is the end if
// the client closed the connection or shut down its sending side.
func hungUp(raw syscall.RawConn) bool {
	hup := true
	raw.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if _, err := unix.Poll(p, 0); err == nil {
			hup = p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0
		}
	})
	return hup
}

// rights are the descriptors of every SCM_RIGHTS message in oob.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

// closeFDs closes what a message carried, but for what a handler took
// (marked -1): santad keeps no client's descriptor.
func closeFDs(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// admitConnection counts a new connection of a non-admin uid, or returns
// the quota it would exceed (then nothing is counted). answer says whether
// the refusal is to be answered: one connection of a uid at a time waits
// for its first request to be told why (refuseConnection, up to
// refuseWait); more are closed at once, so that a uid at its quota cannot
// hold santad's descriptors by connecting again and again.
func (s *Server) admitConnection(uid uint32) (quota uint32, answer bool) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.connQuota > 0 && s.byUID[uid] >= s.connQuota {
		answer = !s.refusing[uid]
		s.refusing[uid] = true
		return s.connQuota, answer
	}
	s.byUID[uid]++
	return 0, false
}

// refused ends the answered refusal of uid's connection.
func (s *Server) refused(uid uint32) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	delete(s.refusing, uid)
}

func (s *Server) releaseConnection(uid uint32) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.byUID[uid]--; s.byUID[uid] == 0 {
		delete(s.byUID, uid)
	}
}

// refuseWait is how long a connection over its uid's quota has to send its
// first request, which is answered EDQUOT.
const refuseWait = time.Second

// refuseConnection answers the first request of a connection that would
// exceed its uid's quota with EDQUOT, whatever it asks, and ends it. The
// reply tells a client why, where a closed connection would not.
func refuseConnection(c *net.UnixConn, raw syscall.RawConn, uid, quota uint32) {
	c.SetReadDeadline(time.Now().Add(refuseWait))
	buf := make([]byte, protocol.HeaderLen)
	oob := make([]byte, unix.CmsgSpace(4*maxFDs))
	n, fds, err := receive(raw, buf, oob)
	closeFDs(fds)
	if err != nil || n == 0 {
		return
	}
	h, _, _ := protocol.Decode(buf) // for its seq
	msg, err := protocol.Encode((&session{}).replyVersion(h), h.Seq, protocol.Errorf(syscall.EDQUOT,
		"quota of %d connections to santad for uid %d exceeded: close some (quota_connections)", quota, uid))
	if err == nil {
		c.Write(msg)
	}
}

// track registers an open connection; false once the server shuts down.
func (s *Server) track(c *net.UnixConn) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.conns == nil {
		return false
	}
	s.conns[c] = true
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(c *net.UnixConn) {
	s.connMu.Lock()
	if s.conns != nil {
		delete(s.conns, c)
	}
	s.connMu.Unlock()
	c.Close()
	s.wg.Done()
}

// closeConns ends every connection and waits for their goroutines; open
// transactions are dropped with them.
func (s *Server) closeConns() {
	s.connMu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.connMu.Unlock()
	s.wg.Wait()
}

// connections is how many clients are connected.
func (s *Server) connections() int {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return len(s.conns)
}
