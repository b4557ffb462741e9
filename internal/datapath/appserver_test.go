package datapath

import (
	"bufio"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// appServer answers every line it reads (a request ends with "\n") with
// "APP:" and the line: a stand-in for the application, whose answers tell
// its path from the kernel's. It reads like Go servers do (non-blocking,
// woken by the poller), or, if blocking, like a thread per connection, or,
// if bare, like nginx: accept4, poll, read, write, and no other call on the
// connection; accept4 without the peer's address unless peer is set.
//
// Unless blocking, it reads only once the poller tells data waits. A
// server that reads at once after accept races the client's first request:
// one that arrives while that read holds the socket passes
// (santa_app_receiving), and with it the connection. That is safe, but the
// tests want the kernel's answers whatever the timing; the tests of that
// path make it happen on purpose.
type appServer struct {
	ln          net.Listener
	acceptDelay time.Duration
	blocking    bool
	bare        bool
	peer        bool
	first       func(fd int)  // bare: runs on each accepted socket before anything reads it
	think       time.Duration // how long the application takes to answer a line it read
	accepted    chan struct{} // one per connection accepted
}

func (s *appServer) serve() {
	for {
		if s.acceptDelay > 0 {
			// From the moment a connection waits: its first request
			// surely comes before accept().
			if err := s.waitPending(); err != nil {
				return
			}
			time.Sleep(s.acceptDelay)
		}
		c, err := s.accept()
		if err != nil {
			return
		}
		s.accepted <- struct{}{}
		go s.answer(c)
	}
}

// accept takes the next connection.
func (s *appServer) accept() (io.ReadWriteCloser, error) {
	if s.bare {
		return s.acceptBare()
	}
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	if !s.blocking {
		return c, nil
	}
	// A copy of the socket, read outside Go's poller: Fd() puts it in
	// blocking mode.
	f, err := c.(*net.TCPConn).File()
	c.Close()
	if err != nil {
		return nil, err
	}
	f.Fd()
	return f, nil
}

// acceptBare accepts with accept4 alone, and runs first on the connection.
func (s *appServer) acceptBare() (io.ReadWriteCloser, error) {
	for {
		nfd, aerr := -1, error(nil)
		if err := s.controlListener(func(fd int) { nfd, aerr = s.accept4(fd) }); err != nil {
			return nil, err // the listener is closed
		}
		switch {
		case aerr == unix.EAGAIN:
			if err := s.waitPending(); err != nil {
				return nil, err
			}
		case aerr != nil:
			return nil, aerr
		default:
			if s.first != nil {
				s.first(nfd)
			}
			return bareConn(nfd), nil
		}
	}
}

// accept4 accepts a connection on the listener fd, with or without its
// peer's address (the kernel runs getpeername's hooks for the address).
func (s *appServer) accept4(fd int) (int, error) {
	const flags = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	if s.peer {
		nfd, _, err := unix.Accept4(fd, flags)
		return nfd, err
	}
	nfd, _, errno := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(fd), 0, 0, flags, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(nfd), nil
}

// waitPending returns once a connection waits to be accepted, or with an
// error once the listener is closed. (A listener's raw Read is not Go's
// to give: it polls the listener itself.)
func (s *appServer) waitPending() error {
	for {
		ready := false
		err := s.controlListener(func(fd int) { ready = pollIn(fd, 100) })
		if err != nil || ready {
			return err
		}
	}
}

func (s *appServer) controlListener(f func(fd int)) error {
	raw, err := s.ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		return err
	}
	return raw.Control(func(fd uintptr) { f(int(fd)) })
}

func (s *appServer) answer(rw io.ReadWriteCloser) {
	defer rw.Close()
	if c, ok := rw.(net.Conn); ok {
		waitReadable(c)
	}
	in := bufio.NewReader(rw)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		time.Sleep(s.think)
		if _, err := rw.Write(append([]byte("APP:"), line...)); err != nil {
			return
		}
	}
}

// waitReadable returns once data waits on c (or c is closed), with no
// receive call: poll(2) tells without the socket's lock, and Go's poller
// parks the goroutine until it may tell otherwise.
func waitReadable(c net.Conn) {
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return
	}
	raw.Read(func(fd uintptr) bool { return pollIn(int(fd), 0) })
}

// pollIn tells whether, within timeout milliseconds, fd has something for
// its next call: data (a connection, for a listener), or an error or a
// hang-up that the call reports.
func pollIn(fd, timeout int) bool {
	n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, timeout)
	return n > 0
}

// bareConn is a non-blocking socket read after poll(), as nginx reads. A
// read gives up after bareIdle without data.
type bareConn int

const bareIdle = 30 * time.Second

func (c bareConn) Read(p []byte) (int, error) {
	for deadline := time.Now().Add(bareIdle); time.Now().Before(deadline); {
		if !pollIn(int(c), 1000) {
			continue
		}
		n, err := unix.Read(int(c), p)
		switch {
		case err == unix.EAGAIN:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		default:
			return n, nil
		}
	}
	return 0, unix.ETIMEDOUT
}

func (c bareConn) Write(p []byte) (int, error) { return unix.Write(int(c), p) }

func (c bareConn) Close() error { return unix.Close(int(c)) }
