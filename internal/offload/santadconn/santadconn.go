// Package santadconn is what the offload agents share of their dealings
// with santad: dialling it as needed and again after it failed, telling a
// refusal from a broken connection, taking a server's socket up as a
// service (attached, or adopted by its cookie after a restart), the
// agents' periodic loops, and detaching on exit.
package santadconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/server"
)

// Txn is a transaction on one service (*client.Txn).
type Txn interface {
	ReplaceRules(updates []client.RuleEntry) error
	DeleteRules(ids []uint32) error
	Commit() (added int, err error)
	Abort() error
}

// Client is a *client.Client whose Begin returns a Txn, as the agents'
// Santad interfaces (and their fakes) have it.
type Client struct{ *client.Client }

func (c Client) Begin(service uint32) (Txn, error) { return c.Client.Begin(service) }

// Dial connects to santad's socket at path as name (santactl services
// shows it as the manager of the services it attaches).
func Dial(path, name string) (Client, error) {
	c, err := client.DialAs(path, name)
	if err != nil {
		return Client{}, err
	}
	return Client{c}, nil
}

// Conn is a connection to santad: nil (its zero) when there is none.
type Conn interface {
	comparable
	io.Closer
}

// Dialer dials santad as needed, logging a failure once for a run of
// them.
type Dialer[S Conn] struct {
	dial    func() (S, error)
	failing bool
}

func NewDialer[S Conn](dial func() (S, error)) *Dialer[S] { return &Dialer[S]{dial: dial} }

// Get returns *sd, dialling it first if it is nil.
func (d *Dialer[S]) Get(sd *S, log *slog.Logger) (S, error) {
	var none S
	if *sd != none {
		return *sd, nil
	}
	s, err := d.dial()
	if err != nil {
		if !d.failing {
			log.Warn("connecting to santad; trying again every scan, quietly", "err", err)
		}
		d.failing = true
		return s, err
	}
	*sd, d.failing = s, false
	log.Info("connected to santad")
	return s, nil
}

// Drop handles the error of a santad call on *sd: a refusal
// (*client.Error) is the request's, and is logged; anything else is the
// connection's: it is closed and *sd set to nil. It returns whether the
// connection was dropped: then the caller forgets its services, which the
// next scan takes up again by cookie.
func Drop[S Conn](sd *S, log *slog.Logger, what string, err error) bool {
	if Refused(err) {
		log.Warn(what, "err", err)
		return false
	}
	log.Warn(what+": dropping the connection to santad", "err", err)
	var none S
	if *sd != none {
		(*sd).Close()
	}
	*sd = none
	return true
}

// DetachAll detaches services, in order, from *sd if it is connected, and
// closes it: the agent is leaving.
func DetachAll[S interface {
	Conn
	Detach(uint32) error
}](sd *S, services []uint32, log *slog.Logger) {
	var none S
	if *sd == none {
		return
	}
	for _, id := range services {
		if err := (*sd).Detach(id); err != nil {
			log.Warn("detaching", "service", id, "err", err)
		}
	}
	log.Info("detached", "services", len(services))
	(*sd).Close()
	*sd = none
}

// ErrTake is the error of a socket that could not be taken from the
// server (TakeUp): no fault of santad's.
var ErrTake = errors.New("taking the server's socket")

// TakeUp takes socket s from the server (take) and returns its service:
// the one santad has for its cookie (adopted: after a restart of santad or
// of the agent), or one attached now. Errors taking the socket wrap
// ErrTake; the others are AttachFD's.
func TakeUp(sd interface {
	AttachFD(fd int) (client.ServiceInfo, error)
}, take func(server.Socket) (int, error), s server.Socket, byCookie map[uint64]client.ServiceInfo) (info client.ServiceInfo, adopted bool, err error) {
	fd, err := take(s)
	if err != nil {
		return info, false, fmt.Errorf("%w %v (pid %d, fd %d): %w", ErrTake, s.Local, s.Holder.PID, s.Holder.FD, err)
	}
	defer unix.Close(fd) // santad's service lives as long as the server's socket
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_COOKIE)
	if err != nil {
		return info, false, fmt.Errorf("%w %v: its cookie: %w", ErrTake, s.Local, err)
	}
	if info, adopted = byCookie[cookie]; adopted {
		return info, true, nil
	}
	info, err = sd.AttachFD(fd)
	return info, false, err
}

// Loops runs an agent's periodic loops: each runs its function at once,
// then every period, until ctx ends.
type Loops struct{ wg sync.WaitGroup }

// Every starts a loop.
func (l *Loops) Every(ctx context.Context, d time.Duration, f func(context.Context)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			f(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Wait waits until every loop has ended.
func (l *Loops) Wait() { l.wg.Wait() }

// Survey is what a scan starts from: which of the sockets the agent knows
// are still the server's, the server's sockets it does not know yet, and
// santad's services.
type Survey struct {
	Live     map[uint64]bool // of the known sockets, by inode: still bound
	Fresh    []server.Socket
	ByCookie map[uint64]client.ServiceInfo
	listed   map[uint32]bool
}

// ErrScan wraps the errors of finding the server's sockets (TakeSurvey):
// no fault of santad's.
var ErrScan = errors.New("scanning the server's sockets")

// ScanLog logs the failures of an agent's scans: each once, when it
// starts or changes, and when scans work again. An agent scans 4 times a
// second, and some failures last (a port whose sockets two users hold
// fails every scan until one leaves).
type ScanLog struct{ last string }

// Failed logs err, unless it is the failure logged last.
func (l *ScanLog) Failed(log *slog.Logger, what string, err error) {
	if msg := err.Error(); msg != l.last {
		l.last = msg
		log.Warn(what+"; trying again every scan, quietly while it fails so", "err", err)
	}
}

// Worked logs that a scan worked, if the last one failed.
func (l *ScanLog) Worked(log *slog.Logger, what string) {
	if l.last != "" {
		l.last = ""
		log.Info(what + ": working again")
	}
}

// Refused is whether err is santad's refusal of a request, after which
// the connection stays.
func Refused(err error) bool {
	var refusal *client.Error
	return errors.As(err, &refusal)
}

// TakeLog logs each socket's failure to be taken up (ErrTake, or santad
// refusing its attach) once while it fails so: a scan runs 4 times a
// second, and some failures last (an agent not allowed to take the
// server's descriptors, santad's quota of services).
type TakeLog struct{ last map[uint64]string }

// Failed logs err of the socket of inode, unless it is the one logged
// last for it.
func (l *TakeLog) Failed(log *slog.Logger, inode uint64, what string, err error) {
	if msg := err.Error(); msg != l.last[inode] {
		if l.last == nil {
			l.last = map[uint64]string{}
		}
		l.last[inode] = msg
		log.Warn(what+"; trying again every scan, quietly while it fails so", "err", err)
	}
}

// Worked logs that the socket of inode was taken up, if it failed before.
func (l *TakeLog) Worked(log *slog.Logger, inode uint64, what string) {
	if _, ok := l.last[inode]; ok {
		delete(l.last, inode)
		log.Info(what+": working again", "inode", inode)
	}
}

// Keep forgets the sockets not in fresh: gone, or taken up.
func (l *TakeLog) Keep(fresh []server.Socket) {
	maps.DeleteFunc(l.last, func(inode uint64, _ string) bool {
		return !slices.ContainsFunc(fresh, func(s server.Socket) bool { return s.Inode == inode })
	})
}

// TakeSurvey finds the server's sockets, knowing those in known (by
// inode), and lists santad's services. Errors of the finder wrap ErrScan;
// the others are santad's. sd.Services must give every service santad
// has (client.Services reads every page of them): Gone takes a service
// missing from it for one santad dropped.
func TakeSurvey[V any](sd interface {
	Services() ([]client.ServiceInfo, error)
}, f server.Scanner, known map[uint64]V) (Survey, error) {
	inodes := make(map[uint64]bool, len(known))
	for inode := range known {
		inodes[inode] = true
	}
	var s Survey
	var err error
	if s.Live, s.Fresh, err = f.Scan(inodes); err != nil {
		return s, fmt.Errorf("%w: %w", ErrScan, err)
	}
	infos, err := sd.Services()
	if err != nil {
		return s, fmt.Errorf("listing services: %w", err)
	}
	s.ByCookie, s.listed = map[uint64]client.ServiceInfo{}, map[uint32]bool{}
	for _, i := range infos {
		s.ByCookie[i.Cookie] = i
		s.listed[i.ServiceID] = true
	}
	return s, nil
}

// Gone is why the agent's service id of socket inode is over ("" if it is
// not): its socket closed (santad ended the service and its rules), or
// santad no longer has it (its socket is fresh at the next scan).
func (s Survey) Gone(inode uint64, id uint32) string {
	switch {
	case !s.Live[inode]:
		return "socket closed"
	case !s.listed[id]:
		return "service gone from santad"
	}
	return ""
}
