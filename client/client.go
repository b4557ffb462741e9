package client

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
)

// Client is a connection to santad. Its methods may be called from several
// goroutines; requests are then sent one at a time.
type Client struct {
	conn    *net.UnixConn
	session Session
	version uint16 // the protocol version HELLO agreed on: every later message's

	mu  sync.Mutex // one request in flight, so the reply read is its own
	seq uint32
	buf []byte // one datagram
	out []byte // the last request's, which the next is encoded into
}

// Dial connects to santad at path ("": DefaultPath, $SANTA_SOCKET or
// DefaultSocket) and introduces the client with HELLO,
// named after the program, which agrees on the newest protocol version
// both speak. A daemon that speaks only version 1 is served too, but
// refuses what version 1 cannot carry (a rule's length condition,
// learning) before it is sent.
func Dial(path string) (*Client, error) { return DialAs(path, programName()) }

// DialAs is Dial with the client's name given: santad logs it, and
// reports it as the manager of the services the client attaches or
// learns on (an agent names itself, e.g. "santa-offload dns"). At most
// protocol.MaxClientName bytes of UTF-8.
func DialAs(path, name string) (*Client, error) {
	if path == "" {
		path = DefaultPath()
	}
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("dial santad: %w", explainDial(path, err))
	}
	// HELLO goes in version 1, which every daemon reads; its reply comes in
	// the version agreed on.
	c := &Client{conn: conn, buf: make([]byte, protocol.MaxMessage), version: protocol.Version1}
	hello := &protocol.Hello{MinVersion: protocol.MinVersion, MaxVersion: protocol.MaxVersion, Client: name}
	s, err := call[*protocol.HelloReply](c, hello, nil)
	if err == nil && !protocol.Speaks(s.Version) {
		err = fmt.Errorf("daemon chose version %d; this client speaks %d to %d", s.Version, protocol.MinVersion, protocol.MaxVersion)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("hello santad: %w", err)
	}
	c.session, c.version = *s, s.Version
	return c, nil
}

// programName names the client in the daemon's logs.
func programName() string {
	name := filepath.Base(os.Args[0])
	if len(name) > protocol.MaxClientName {
		name = name[:protocol.MaxClientName]
	}
	return strings.ToValidUTF8(name, "")
}

// Session is who the daemon thinks the client is.
func (c *Client) Session() Session { return c.session }

// Close closes the connection; the daemon aborts its open transactions.
func (c *Client) Close() error { return c.conn.Close() }

// call sends req with the control message oob and reads its reply, which
// must be an R. A refusal is the daemon's *Error, and so is a request this
// side refuses to encode: the daemon would refuse it the same way.
func call[R protocol.Body](c *Client, req protocol.Body, oob []byte) (R, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.send(req, oob); err != nil {
		var none R
		return none, err
	}
	return receive[R](c, req, c.seq)
}

// send sends req with the control message oob, as the next seq. Called
// with c.mu held.
func (c *Client) send(req protocol.Body, oob []byte) error {
	c.seq++
	msg, err := protocol.AppendEncode(c.out, c.version, c.seq, req)
	if err != nil {
		return err
	}
	c.out = msg
	_, _, err = c.conn.WriteMsgUnix(msg, oob, nil)
	return err
}

// receive reads the reply to req, sent as seq, which must be an R. Called
// with c.mu held.
func receive[R protocol.Body](c *Client, req protocol.Body, seq uint32) (R, error) {
	var none R
	n, _, flags, _, err := c.conn.ReadMsgUnix(c.buf, nil)
	switch {
	case err != nil:
		return none, err
	case n == 0:
		return none, errors.New("santad closed the connection")
	case flags&unix.MSG_TRUNC != 0:
		return none, fmt.Errorf("reply to %v is over %d bytes", req.Type(), protocol.MaxMessage)
	}
	// A reply this side cannot decode is no refusal of the daemon's, so
	// its *protocol.Error is not wrapped.
	h, body, err := protocol.Decode(c.buf[:n])
	if err != nil {
		return none, fmt.Errorf("bad reply to %v: %v", req.Type(), err)
	}
	if h.Seq != seq {
		return none, fmt.Errorf("reply with seq %d to request %d", h.Seq, seq)
	}
	if hello, ok := body.(*protocol.HelloReply); ok && h.Version != hello.Version {
		return none, fmt.Errorf("HELLO reply in version %d agrees on version %d", h.Version, hello.Version)
	} else if !ok && h.Version != c.version {
		return none, fmt.Errorf("reply to %v in version %d; the connection speaks %d", req.Type(), h.Version, c.version)
	}
	if e, ok := body.(*protocol.Error); ok {
		return none, e
	}
	r, ok := body.(R)
	if !ok {
		return none, fmt.Errorf("%v to a %v request", h.Type, req.Type())
	}
	return r, nil
}
