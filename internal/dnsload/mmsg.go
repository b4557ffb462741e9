package dnsload

import (
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxBatch bounds Config.Batch: each message of a batch has a receive
// buffer of its own, as large as a UDP datagram can be (64 KiB), so that
// a reply is never cut before it is checked.
const MaxBatch = 256

// mmsghdr is the kernel's struct mmsghdr, which x/sys/unix does not
// define: a message header and the length sent or received. Go pads it
// to the header's alignment, as C does.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// mmsg sends and reads a connected UDP socket's datagrams in batches, with
// sendmmsg(2) and recvmmsg(2) through the Go poller (non-blocking; the
// read deadline holds). Each received message has its own control buffer
// for its kernel arrival time.
type mmsg struct {
	raw     syscall.RawConn
	out, in []mmsghdr
	outIov  []unix.Iovec
	inIov   []unix.Iovec
	oob     [][]byte
	buf     [][]byte
	got     []datagram
}

func newMmsg(conn *net.UDPConn, batch int) (*mmsg, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	m := &mmsg{raw: raw, out: make([]mmsghdr, batch), in: make([]mmsghdr, batch),
		outIov: make([]unix.Iovec, batch), inIov: make([]unix.Iovec, batch),
		oob: make([][]byte, batch), buf: make([][]byte, batch), got: make([]datagram, 0, batch)}
	for i := range batch {
		m.buf[i], m.oob[i] = make([]byte, 65536), make([]byte, oobLen)
		m.inIov[i].Base = &m.buf[i][0]
		m.inIov[i].SetLen(len(m.buf[i]))
		m.in[i].hdr.Iov = &m.inIov[i]
		m.in[i].hdr.SetIovlen(1)
		m.in[i].hdr.Control = &m.oob[i][0]
		m.out[i].hdr.Iov = &m.outIov[i]
		m.out[i].hdr.SetIovlen(1)
	}
	return m, nil
}

// send sends qs (at most the batch) in order, one datagram each, and
// returns how many it sent before an error: the kernel reports an error
// only when it sent none, and stops at it.
func (m *mmsg) send(qs [][]byte) (int, error) {
	for i, q := range qs {
		m.outIov[i].Base = &q[0]
		m.outIov[i].SetLen(len(q))
	}
	return m.call(m.raw.Write, unix.SYS_SENDMMSG, "sendmmsg", m.out[:len(qs)])
}

// recv reads the datagrams there are, at least one and at most the batch,
// waiting until the read deadline. The datagrams are valid until the next
// recv.
func (m *mmsg) recv() ([]datagram, error) {
	for i := range m.in {
		m.in[i].hdr.SetControllen(len(m.oob[i])) // the kernel set it to what it used
	}
	n, err := m.call(m.raw.Read, unix.SYS_RECVMMSG, "recvmmsg", m.in)
	if err != nil {
		return nil, err
	}
	m.got = m.got[:0]
	for i := range n {
		h := &m.in[i]
		at, err := arrival(m.oob[i][:h.hdr.Controllen])
		if err != nil {
			return nil, err
		}
		m.got = append(m.got, datagram{b: m.buf[i][:h.n], at: at})
	}
	return m.got, nil
}

// call makes the syscall trap, called name (sendmmsg or recvmmsg; no
// flags, no timeout), on msgs when the poller says the socket is ready
// (wait: the raw conn's Write or Read), and returns how many messages it
// handled.
func (m *mmsg) call(wait func(func(uintptr) bool) error, trap uintptr, name string, msgs []mmsghdr) (int, error) {
	var n uintptr
	var errno syscall.Errno
	err := wait(func(fd uintptr) bool {
		for {
			n, _, errno = unix.Syscall6(trap, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), 0, 0, 0)
			if errno != unix.EINTR {
				return errno != unix.EAGAIN
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, os.NewSyscallError(name, errno)
	}
	return int(n), nil
}
