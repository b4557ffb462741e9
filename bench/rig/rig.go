// Package rig is the Go side of bench/rig.sh, the two-namespace veth rig of
// the end-to-end benchmarks: it brings the rig up and down and runs code in
// its namespaces, and it measures what a run costs each CPU.
package rig

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/santa-offload/santa/internal/netns"
)

// The rig's fixed addresses (see bench/rig.sh).
var (
	ServerMAC = [6]byte{0x02, 0x77, 0, 0, 0, 1}
	ClientMAC = [6]byte{0x02, 0x77, 0, 0, 0, 2}
)

const (
	ServerIPv4 = "10.77.0.1"
	ClientIPv4 = "10.77.0.2"
)

// Rig is one rig, named Name: namespaces Name-srv and Name-cli joined by
// veths Name-s and Name-c. With DefaultOffloads the veths keep their
// default offloads (rig.sh --default-offloads): the client's requests then
// carry partial UDP checksums. With SocketQueue the client's socket
// traffic reaches the server by a ring the XDP generator does not fill
// (rig.sh --socket-queue): TCP beside the generator's flood.
type Rig struct {
	Name, Script    string
	DefaultOffloads bool
	SocketQueue     bool
}

func (r Rig) ServerNS() string  { return r.Name + "-srv" }
func (r Rig) ClientNS() string  { return r.Name + "-cli" }
func (r Rig) ServerDev() string { return r.Name + "-s" }
func (r Rig) ClientDev() string { return r.Name + "-c" }

// Up creates the rig with threaded NAPI on both veths, pinned to the server
// and the client CPU.
func (r Rig) Up(serverCPU, clientCPU int) error {
	args := []string{"--threaded-napi", "--server-cpu", fmt.Sprint(serverCPU), "--client-cpu", fmt.Sprint(clientCPU)}
	if r.DefaultOffloads {
		args = append(args, "--default-offloads")
	}
	if r.SocketQueue {
		args = append(args, "--socket-queue")
	}
	return r.script("up", args...)
}

// SetClientTxChecksum turns the client veth's TX checksum offload on (its
// default: the client's stack leaves UDP checksums partial) or off (full
// checksums, as from a NIC), so that one run can measure both.
func (r Rig) SetClientTxChecksum(on bool) error {
	state := map[bool]string{true: "on", false: "off"}[on]
	out, err := exec.Command("ip", "netns", "exec", r.ClientNS(), "ethtool", "-K", r.ClientDev(), "tx", state).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ethtool -K %s tx %s: %v\n%s", r.ClientDev(), state, err, out)
	}
	return nil
}

// The idle check: the server CPU counts as quiet under idleBelow % busy
// over a second; Start waits up to idleWait for such a second.
const (
	idleBelow = 10
	idleWait  = 20 * time.Second
)

// Start is how a benchmark begins: this process's threads (and thereby
// the children it starts) move to the client CPU, the rig comes up, and
// the idle check waits for the server CPU to be quiet (the kernel may
// still be freeing a previous run's maps, say). Its last second's busy
// share is returned, to be reported with the results; if the CPU never
// got quiet, a warning goes to stderr and the run goes on. The caller
// takes the rig Down.
func (r Rig) Start(serverCPU, clientCPU int) (idleBusy float64, err error) {
	if err := PinAllThreads(clientCPU); err != nil {
		return 0, err
	}
	if err := r.Up(serverCPU, clientCPU); err != nil {
		return 0, errors.Join(err, r.Down()) // whatever Up made before it failed
	}
	for deadline := time.Now().Add(idleWait); ; {
		if idleBusy, err = IdleBusy(serverCPU, time.Second); err != nil {
			return 0, errors.Join(err, r.Down())
		}
		if idleBusy < idleBelow {
			return idleBusy, nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "rig: server CPU %d still %.0f %% busy after %v; measuring anyway\n",
				serverCPU, idleBusy, idleWait)
			return idleBusy, nil
		}
	}
}

// Stop is Down for a deferred call: it keeps the first error in *err.
func (r Rig) Stop(err *error) {
	if derr := r.Down(); derr != nil && *err == nil {
		*err = derr
	}
}

// Down removes the rig and everything in it.
func (r Rig) Down() error { return r.script("down") }

func (r Rig) script(cmd string, args ...string) error {
	out, err := exec.Command("bash", append([]string{r.Script, cmd, r.Name}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rig.sh %s: %v\n%s", cmd, err, out)
	}
	return nil
}

// OnDev runs fn in namespace ns with the index of its device dev: what
// is attached to an interface by index must be attached from its namespace.
func OnDev(ns, dev string, fn func(ifindex int) error) error {
	return InNetns(ns, func() error {
		iface, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		return fn(iface.Index)
	})
}

// InNetns runs fn in the named network namespace (internal/netns).
func InNetns(ns string, fn func() error) error { return netns.Run(netns.Named(ns), fn) }

// Dial connects from the client namespace to port of the server
// (ServerIPv4) over network ("tcp" or "udp"), waiting at most a second.
func (r Rig) Dial(network string, port int) (net.Conn, error) {
	var conn net.Conn
	err := InNetns(r.ClientNS(), func() error {
		var err error
		conn, err = net.DialTimeout(network, net.JoinHostPort(ServerIPv4, strconv.Itoa(port)), time.Second)
		return err
	})
	return conn, err
}

// CheckClientTxChecksums checks that the client veth computes full UDP
// checksums in software (rig.sh turns TX checksum offload off), as a NIC
// would deliver them: with offload on, a socket client's packets would
// carry partial checksums, which XDP programs cannot verify (Santa
// passes them to TC).
func (r Rig) CheckClientTxChecksums() error {
	out, err := exec.Command("ip", "netns", "exec", r.ClientNS(), "ethtool", "-k", r.ClientDev()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ethtool -k %s: %v\n%s", r.ClientDev(), err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "tx-checksumming: "); ok {
			if strings.HasPrefix(v, "off") {
				return nil
			}
			return fmt.Errorf("TX checksum offload is %q on %s: a socket client's UDP checksums would be partial", v, r.ClientDev())
		}
	}
	return fmt.Errorf("ethtool -k %s says nothing of tx-checksumming:\n%s", r.ClientDev(), out)
}

// WaitServerXDPGone waits up to timeout until the server veth has no XDP
// program: a process's XDP link goes some time after its last reference
// (the kernel releases links in deferred work), and the next data plane
// can attach in native mode only then.
func (r Rig) WaitServerXDPGone(timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		out, err := exec.Command("ip", "-n", r.ServerNS(), "link", "show", "dev", r.ServerDev()).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip link show %s: %v\n%s", r.ServerDev(), err, out)
		}
		if !strings.Contains(string(out), "prog/xdp") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("an XDP program is still attached to %s %v after its data plane ended:\n%s", r.ServerDev(), timeout, out)
		}
	}
}
