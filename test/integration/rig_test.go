package integration

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRigSocketQueue: with --socket-queue, the client's TCP reaches the
// server veth by its second receive queue, the one the XDP generator's
// frames (XDP_TX from the client CPU, queue <CPU> % 2) do not fill
// (bench/rig.sh), whichever CPU sends it: TCP also sends from the server
// CPU (segments its small-queues limit held back go out when the server's
// NAPI frees the ones before them).
func TestRigSocketQueue(t *testing.T) {
	requireRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs: the rig's server and client CPU")
	}
	const clientCPU, serverCPU = 0, 1
	r := newRig(t, "q", "--threaded-napi", "--server-cpu", strconv.Itoa(serverCPU), "--client-cpu", strconv.Itoa(clientCPU), "--socket-queue")

	var ln net.Listener
	if err := inNetns(r.srv, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(serverIPv4, "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan int, 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				n, _ := io.Copy(io.Discard, conn)
				received <- int(n)
			}()
		}
	}()

	// One connection from the client CPU, and several from the server CPU:
	// without a map for that CPU, each would take either queue by its
	// flow's hash.
	const writes = 50
	request := []byte("set k 0 0 1\r\nv\r\n")
	cpus := []int{clientCPU, serverCPU, serverCPU, serverCPU, serverCPU}
	before := rxQueuePackets(t, r)
	for _, cpu := range cpus {
		if err := inNetns(r.cli, func() error { return writeFromCPU(cpu, ln.Addr().String(), request, writes) }); err != nil {
			t.Fatal(err)
		}
	}
	for range cpus {
		select {
		case n := <-received:
			if n != writes*len(request) {
				t.Fatalf("the server received %d bytes on a connection, want %d", n, writes*len(request))
			}
		case <-time.After(replyTimeout):
			t.Fatal("a server connection did not end")
		}
	}
	after := rxQueuePackets(t, r)
	socketQueue, xdpQueue := 1-clientCPU%2, clientCPU%2
	got, other := after[socketQueue]-before[socketQueue], after[xdpQueue]-before[xdpQueue]
	// A few packets the kernel sends on its own (IPv6 router
	// solicitations, say) may take either queue.
	if total := len(cpus) * writes; got < uint64(total/2) || other > 5 {
		t.Errorf("server veth receive queues: %d packets on queue %d, %d on queue %d; want the TCP connections' (about %d) on %d",
			got, socketQueue, other, xdpQueue, total, socketQueue)
	}
}

// writeFromCPU connects to addr and writes request n times, a segment each,
// with the calling thread pinned to cpu (netns.Run holds the goroutine on
// its thread: every write leaves from cpu).
func writeFromCPU(cpu int, addr string, request []byte, n int) error {
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return err
	}
	conn, err := net.DialTimeout("tcp4", addr, replyTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetNoDelay(true)
	for range n {
		if _, err := conn.Write(request); err != nil {
			return err
		}
		time.Sleep(100 * time.Microsecond) // a segment each
	}
	return nil
}

// rxQueuePackets is how many packets each of the server veth's two receive
// queues took (veth's rx_queue_<i>_xdp_packets counts every packet its
// NAPI polls, XDP attached or not).
func rxQueuePackets(t *testing.T, r *rig) [2]uint64 {
	t.Helper()
	out, err := commandOutput(t, 10*time.Second, "ip", "netns", "exec", r.srv, "ethtool", "-S", r.srvDev)
	if err != nil {
		t.Fatal(err)
	}
	var n [2]uint64
	found := 0
	for _, line := range strings.Split(out, "\n") {
		for q := range n {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), fmt.Sprintf("rx_queue_%d_xdp_packets: ", q)); ok {
				if n[q], err = strconv.ParseUint(v, 10, 64); err != nil {
					t.Fatalf("ethtool -S %s: %q: %v", r.srvDev, line, err)
				}
				found++
			}
		}
	}
	if found != 2 {
		t.Fatalf("ethtool -S %s: want the counts of 2 receive queues, got %d:\n%s", r.srvDev, found, out)
	}
	return n
}
