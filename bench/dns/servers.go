package main

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

	"github.com/santa-offload/santa/bench/rig"
)

// A server is a DNS server from Debian's packages, run with one worker
// thread, no rate limiting, authoritative for the zone only.
type server struct {
	name string
	// config writes the configuration into dir (zone file: dir/zone) and
	// returns the command line that runs the server in the foreground.
	config func(dir, ip string) ([]string, error)
}

var servers = map[string]server{
	"bind": {"bind", bindConfig},
	"knot": {"knot", knotConfig},
	"nsd":  {"nsd", nsdConfig},
}

func bindConfig(dir, ip string) ([]string, error) {
	conf := filepath.Join(dir, "named.conf")
	err := os.WriteFile(conf, fmt.Appendf(nil, `options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	session-keyfile "%[1]s/session.key";
	listen-on port 53 { %[2]s; };
	listen-on-v6 { none; };
	recursion no;
	notify no;
	dnssec-validation no;
};
zone "%[3]s" { type primary; file "%[1]s/zone"; };
`, dir, ip, zoneName), 0o644)
	// -g: foreground, log to stderr; -n 1: one worker thread.
	return []string{"named", "-g", "-n", "1", "-c", conf}, err
}

func knotConfig(dir, ip string) ([]string, error) {
	conf := filepath.Join(dir, "knot.conf")
	err := os.WriteFile(conf, fmt.Appendf(nil, `server:
    rundir: "%[1]s"
    user: root:root
    listen: %[2]s@53
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "%[1]s"
log:
  - target: stderr
    any: warning
zone:
  - domain: %[3]s
    file: "%[1]s/zone"
    storage: "%[1]s"
    journal-content: none
    zonefile-sync: -1
`, dir, ip, zoneName), 0o644)
	return []string{"knotd", "-c", conf}, err
}

func nsdConfig(dir, ip string) ([]string, error) {
	conf := filepath.Join(dir, "nsd.conf")
	err := os.WriteFile(conf, fmt.Appendf(nil, `server:
    ip-address: %[2]s@53
    server-count: 1
    username: ""
    chroot: ""
    zonesdir: "%[1]s"
    database: ""
    pidfile: "%[1]s/nsd.pid"
    xfrdfile: "%[1]s/xfrd.state"
    zonelistfile: "%[1]s/zone.list"
    cookie-secret-file: "%[1]s/cookie.secret"
    rrl-ratelimit: 0
    verbosity: 0
remote-control:
    control-enable: no
zone:
    name: %[3]s
    zonefile: zone
`, dir, ip, zoneName), 0o644)
	// -d: foreground.
	return []string{"nsd", "-d", "-c", conf}, err
}

// running is a started server.
type running struct {
	cmd *exec.Cmd
}

// start runs s in netns, pinned to cpu, and waits until ready answers.
func start(s server, dir, netns, ip string, cpu int, ready func() error) (*running, error) {
	argv, err := s.config(dir, ip)
	if err != nil {
		return nil, err
	}
	args := append([]string{"netns", "exec", netns, "taskset", "-c", fmt.Sprint(cpu)}, argv...)
	cmd := exec.Command("ip", args...)
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.name, err)
	}
	r := &running{cmd: cmd}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute) // a 1M-name zone takes a while to load
	for {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(log.Name())
			return nil, fmt.Errorf("%s exited (%v) before answering:\n%s", s.name, err, out)
		default:
		}
		if err := ready(); err == nil {
			if err := pinTree(r.pid(), cpu); err != nil {
				r.kill()
				return nil, err
			}
			return r, nil
		} else if time.Now().After(deadline) {
			r.kill()
			return nil, fmt.Errorf("%s did not answer within 2 minutes: %w", s.name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pid is the server's main process (ip and taskset exec it).
func (r *running) pid() int { return r.cmd.Process.Pid }

// stop asks the server to end (SIGTERM), and kills it after 10 s.
func (r *running) stop() error {
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	for range 100 {
		if r.cmd.Process.Signal(syscall.Signal(0)) != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.kill()
	return fmt.Errorf("server %d did not end on SIGTERM", r.pid())
}

func (r *running) kill() { r.cmd.Process.Kill() }

// pinTree pins every thread of pid and of its descendants to cpu. Servers
// may set their own affinity when they start (Knot pins each UDP worker to
// a CPU of its choosing), so the pin is applied again once they serve.
func pinTree(pid, cpu int) error {
	for _, p := range append([]int{pid}, descendants(pid)...) {
		if err := rig.PinThreads(p, cpu); err != nil && !errors.Is(err, fs.ErrNotExist) { // ended meanwhile
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
