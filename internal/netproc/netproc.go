// Package netproc runs a server from Debian's packages (BIND, Knot, NSD,
// memcached, nginx...) in a named network namespace for the tests and
// benchmarks: started, waited for until it serves, optionally pinned to a
// CPU, and stopped with every process it forked.
package netproc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// DefaultReadyTimeout: a 1M-name zone takes a while to load.
	DefaultReadyTimeout = 2 * time.Minute
	stopTimeout         = 10 * time.Second // SIGTERM to the last process gone
)

// Spec is a server to start.
type Spec struct {
	Name    string   // in messages
	Argv    []string // the server in the foreground
	Netns   string   // `ip netns` name it runs in
	LogPath string   // its stdout and stderr, appended
	// Pin, if set, pins the server and every process and thread it makes
	// to CPU.
	Pin bool
	CPU int
	// Ready is polled every 200 ms until it succeeds, for at most
	// ReadyTimeout (DefaultReadyTimeout if 0).
	Ready        func() error
	ReadyTimeout time.Duration
}

// Proc is a running server.
type Proc struct {
	name string
	pid  int
	done chan struct{} // closed when the process has exited and been reaped
}

// Start runs s.Argv in s.Netns and waits until s.Ready succeeds. The
// server dies with this process, even one killed without cleaning up.
// Pinned, its threads are pinned again once it is ready: servers may set
// their own affinity as they start (Knot pins each UDP worker to a CPU of
// its choosing).
func Start(s Spec) (*Proc, error) {
	argv := append([]string{"netns", "exec", s.Netns}, s.Argv...)
	if s.Pin {
		argv = append([]string{"netns", "exec", s.Netns, "taskset", "-c", strconv.Itoa(s.CPU)}, s.Argv...)
	}
	log, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command("ip", argv...) // ip and taskset exec the server: its pid is cmd's
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &Proc{name: s.Name, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the server ends:
		// this one stays until the server has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(p.done)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.Name, err)
	}
	timeout := s.ReadyTimeout
	if timeout == 0 {
		timeout = DefaultReadyTimeout
	}
	for deadline := time.Now().Add(timeout); ; {
		select {
		case <-p.done:
			out, _ := os.ReadFile(s.LogPath)
			return nil, fmt.Errorf("%s exited (%v) before it was ready:\n%s", s.Name, cmd.ProcessState, out)
		default:
		}
		err := s.Ready()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("%s was not ready within %v: %w", s.Name, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s.Pin {
		if err := p.pin(s.CPU); err != nil {
			p.kill()
			return nil, err
		}
	}
	return p, nil
}

// Pid is the server's first process, the one Start ran.
func (p *Proc) Pid() int { return p.pid }

// Pids are the server's processes now: Pid and every process below it
// (NSD forks a process per server, and new ones on each reload).
func (p *Proc) Pids() []int { return append([]int{p.pid}, descendants(p.pid)...) }

// Done is closed when the server's first process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Stop asks the server to end (SIGTERM) and waits until every one of its
// processes has; after 10 s it kills them.
func (p *Proc) Stop() error {
	pids := p.Pids()
	if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	deadline := time.Now().Add(stopTimeout)
	for time.Now().Before(deadline) {
		if !anyAlive(p.done, pids) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.kill()
	return fmt.Errorf("%s (pid %d) did not end within %v of SIGTERM", p.name, p.pid, stopTimeout)
}

// kill kills every process of the server and waits for the first.
func (p *Proc) kill() {
	for _, pid := range p.Pids() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-p.done
}

// anyAlive: the first process is not yet reaped (done open), or one of the
// others still runs (a zombie counts as ended: its parent may be gone).
func anyAlive(done <-chan struct{}, pids []int) bool {
	select {
	case <-done:
	default:
		return true
	}
	for _, pid := range pids[1:] {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// "pid (comm) S ...": the state follows the last ')'.
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] != "Z" {
			return true
		}
	}
	return false
}

// pin pins every thread of the server's processes to cpu.
func (p *Proc) pin(cpu int) error {
	for _, pid := range p.Pids() {
		if err := PinThreads(pid, cpu); err != nil && !errors.Is(err, fs.ErrNotExist) { // ended meanwhile
			return err
		}
	}
	return nil
}

// descendants are the processes below pid (/proc/PID/task/*/children).
func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				out = append(out, child)
				out = append(out, descendants(child)...)
			}
		}
	}
	return out
}
