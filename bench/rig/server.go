package rig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is a server process from Debian's packages (BIND, memcached,
// nginx...) running in the rig's server namespace, pinned to the server
// CPU.
type Server struct {
	name string
	cmd  *exec.Cmd
}

// StartServer runs argv in the network namespace netns, pinned to cpu, its
// output in logPath, and waits until ready succeeds (at most 2 minutes: a
// 1M-name zone takes a while to load). Then it pins every thread of the
// server and its children to cpu again: servers may set their own affinity
// as they start (Knot pins each UDP worker to a CPU of its choosing).
func StartServer(name string, argv []string, netns string, cpu int, logPath string, ready func() error) (*Server, error) {
	args := append([]string{"netns", "exec", netns, "taskset", "-c", fmt.Sprint(cpu)}, argv...)
	cmd := exec.Command("ip", args...)
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	s := &Server{name: name, cmd: cmd}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s exited (%v) before it was ready:\n%s", name, err, out)
		default:
		}
		if err := ready(); err == nil {
			if err := pinTree(s.Pid(), cpu); err != nil {
				s.kill()
				return nil, err
			}
			return s, nil
		} else if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("%s was not ready within 2 minutes: %w", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Pid is the server's main process (ip and taskset exec it).
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop asks the server to end (SIGTERM), and kills it after 10 s.
func (s *Server) Stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	for range 100 {
		if s.cmd.Process.Signal(syscall.Signal(0)) != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.kill()
	return fmt.Errorf("%s (pid %d) did not end on SIGTERM", s.name, s.Pid())
}

func (s *Server) kill() { s.cmd.Process.Kill() }

// pinTree pins every thread of pid and of its descendants to cpu.
func pinTree(pid, cpu int) error {
	for _, p := range append([]int{pid}, descendants(pid)...) {
		if err := PinThreads(p, cpu); err != nil && !errors.Is(err, fs.ErrNotExist) { // ended meanwhile
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
