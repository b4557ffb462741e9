package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/bench/gen"
	benchrig "github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/popularity"
)

// TestGenerator: the benchmark's XDP generator sends every request it is
// asked to, from live frames, and counts and checks every reply, whether
// the kernel (Santa) or the application (hello) sent it.
func TestGenerator(t *testing.T) {
	requireRoot(t)
	bin := buildHello(t)
	r := newRig(t, "g")
	h := startHello(t, bin, r.srv, "-iface", r.srvDev)
	var total gen.Counters

	for _, tc := range []struct {
		name     string
		src, dst string
	}{
		{"IPv4", "10.77.0.2:40000", net.JoinHostPort(serverIPv4, "7777")},
		{"IPv6", "[fd77::2]:40000", net.JoinHostPort(serverIPv6, "7777")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ends := gen.Endpoints{SrcMAC: benchrig.ClientMAC, DstMAC: benchrig.ServerMAC,
				Src: netip.MustParseAddrPort(tc.src), Dst: netip.MustParseAddrPort(tc.dst)}
			// Hello is answered by the kernel, "Hi" by hello itself; only
			// the kernel's reply is expected, so hello's count as bad.
			frames := gen.UDPFrames(ends, [][]byte{[]byte("Hello"), []byte("Hi")})
			cfg := gen.Config{Requests: frames, ReplyPort: 40000, Expected: [][]byte{[]byte("COMSYS")},
				Popularity: popularity.Uniform, SequenceLen: 1024, Seed: 1}
			const rate, d = 2000, 500 * time.Millisecond
			var got gen.Counters
			var ran time.Duration
			err := inNetns(r.cli, func() error {
				iface, err := net.InterfaceByName(r.cliDev)
				if err != nil {
					return err
				}
				cfg.Ifindex = iface.Index
				// A pair a SIGKILLed generator left: Open removes it
				// (noParkedVeth below checks).
				if err := addStalePair(); err != nil {
					return err
				}
				g, err := gen.Open(cfg)
				if err != nil {
					return err
				}
				if ran, err = g.Run(context.Background(), d, rate); err != nil {
					g.Close()
					return err
				}
				time.Sleep(200 * time.Millisecond) // the last replies
				got, err = g.Counters()
				return errors.Join(err, g.Close(), noParkedVeth())
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("counters: %+v", got)
			// Paced: the rate over the time the run really took (its last
			// batch may end well after d on a busy machine), give or take
			// the first burst and timing.
			if want := rate * ran.Seconds(); float64(got.Sent) < want*0.9 || float64(got.Sent) > want*1.1+32 || got.SendErrors != 0 {
				t.Errorf("sent %d requests (%d errors) in %v at %d/s", got.Sent, got.SendErrors, ran, rate)
			}
			if got.ReplyOK+got.ReplyBad != got.Replies {
				t.Errorf("%d replies, %d ok and %d bad: each is one or the other", got.Replies, got.ReplyOK, got.ReplyBad)
			}
			if want := uint64(len("COMSYS")) * got.ReplyOK; got.ReplyBytes < want {
				t.Errorf("reply bytes %d, want at least %d", got.ReplyBytes, want)
			}
			total.Sent += got.Sent
			total.ReplyOK += got.ReplyOK
			total.ReplyBad += got.ReplyBad
		})
	}
	// The generator's account agrees with the server's exactly. (The
	// application may miss a few requests: an skb made from an XDP frame
	// costs a whole page of receive buffer, so a burst fills it quickly.)
	stats := h.stop(t)
	t.Logf("hello: %s", statsLine(h))
	if seen := stats["kernel_answered"] + stats["passed"]; total.Sent != seen {
		t.Errorf("the generator sent %d requests, the server saw %d", total.Sent, seen)
	}
	if total.ReplyOK != stats["kernel_answered"] || total.ReplyBad != stats["app_answered"] {
		t.Errorf("replies: %d expected and %d others; the kernel sent %d and the application %d",
			total.ReplyOK, total.ReplyBad, stats["kernel_answered"], stats["app_answered"])
	}
	if total.ReplyOK == 0 || total.ReplyBad == 0 {
		t.Errorf("%d kernel and %d application replies: want both", total.ReplyOK, total.ReplyBad)
	}
}

// noParkedVeth: a closed generator leaves no veth of its own behind.
// addStalePair adds a parked pair named for a pid no process can have
// (pid_max itself), as a generator killed without releasing it leaves.
func addStalePair() error {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return err
	}
	name := "gh" + strings.TrimSpace(string(b)) + ".1"
	if out, err := exec.Command("ip", "link", "add", name, "type", "veth", "peer", "name", name+"p").CombinedOutput(); err != nil {
		return fmt.Errorf("adding %s: %v: %s", name, err, out)
	}
	return nil
}

func noParkedVeth() error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, "gh") {
			return fmt.Errorf("the generator left %s behind", i.Name)
		}
	}
	return nil
}
