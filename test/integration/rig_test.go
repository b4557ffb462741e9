package integration

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRigSocketQueue: with --socket-queue, TCP sent from the client CPU
// reaches the server veth by its second receive queue, the one the XDP
// generator's frames (XDP_TX from the client CPU, queue <CPU> % 2) do not
// fill (bench/rig.sh).
func TestRigSocketQueue(t *testing.T) {
	requireRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs: the rig's server and client CPU")
	}
	const clientCPU = 0
	r := newRig(t, "q", "--threaded-napi", "--server-cpu", "1", "--client-cpu", strconv.Itoa(clientCPU), "--socket-queue")

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
		conn, err := ln.Accept()
		if err != nil {
			received <- 0
			return
		}
		defer conn.Close()
		n := 0
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			n += k
			if err != nil {
				received <- n
				return
			}
		}
	}()

	before := rxQueuePackets(t, r)
	const writes = 200
	err := inNetns(r.cli, func() error {
		// netns.Run holds this goroutine on its thread: pinned, every
		// write leaves from the client CPU.
		var one unix.CPUSet
		one.Set(clientCPU)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return err
		}
		conn, err := net.DialTimeout("tcp4", ln.Addr().String(), replyTimeout)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.(*net.TCPConn).SetNoDelay(true)
		for range writes {
			if _, err := conn.Write([]byte("set k 0 0 1\r\nv\r\n")); err != nil {
				return err
			}
			time.Sleep(100 * time.Microsecond) // a segment each
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-received:
		if n != writes*len("set k 0 0 1\r\nv\r\n") {
			t.Fatalf("the server received %d bytes, want %d", n, writes*len("set k 0 0 1\r\nv\r\n"))
		}
	case <-time.After(replyTimeout):
		t.Fatal("the server's connection did not end")
	}
	after := rxQueuePackets(t, r)
	socketQueue, xdpQueue := 1-clientCPU%2, clientCPU%2
	got, other := after[socketQueue]-before[socketQueue], after[xdpQueue]-before[xdpQueue]
	// A few packets the kernel sends from other CPUs (IPv6 router
	// solicitations, say) may take either queue.
	if got < writes/2 || other > 5 {
		t.Errorf("server veth receive queues: %d packets on queue %d, %d on queue %d; want the TCP connection's (about %d) on %d",
			got, socketQueue, other, xdpQueue, writes, socketQueue)
	}
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
