package datapath

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// Bad requests to the Go API are refused with a specific reason and change
// nothing.
func TestAPIRefusals(t *testing.T) {
	d := openTest(t)
	s1 := register(t, d, boundUDP(t, "127.0.0.1:0"))
	s2 := register(t, d, boundUDP(t, "127.0.0.1:0"))
	r1, err := d.AddRule(s1, hello())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := d.AddRule(s2, hello())
	if err != nil {
		t.Fatal(err)
	}
	long := hello()
	long.Condition.Pattern = make([]byte, 300)
	nineOffsets := make([]rule.Rule, 9)
	for i := range nineOffsets {
		nineOffsets[i] = hello()
		nineOffsets[i].Condition.Offset = uint16(10 * (i + 1))
	}

	for _, c := range []struct {
		name string
		do   func() error
		want string
	}{
		{"pattern too long", func() error { _, err := d.AddRule(s1, long); return err },
			"condition pattern is 300 bytes; the limit is 256"},
		{"duplicate condition", func() error { _, err := d.AddRule(s1, hello()); return err },
			"same condition"},
		{"too many regions", func() error { _, err := d.AddRules(s1, nineOffsets); return err },
			"number of distinct condition offsets is 10; the limit is 8"},
		{"unknown service", func() error { _, err := d.AddRule(999, hello()); return err },
			"unknown service"},
		{"unknown rule", func() error { return d.DeleteRule(12345) }, "unknown rule"},
		{"batch over two services", func() error { return d.DeleteRules([]model.RuleID{r1, r2}) },
			"a batch touches one service"},
		{"rule twice in a batch", func() error { return d.DeleteRules([]model.RuleID{r1, r1}) },
			"appears twice"},
		{"empty batch", func() error { _, err := d.AddRules(s1, nil); return err }, "empty batch"},
		{"batch not compiled", func() error {
			_, err := d.Apply(s1, model.Batch{Add: []rule.Rule{nineOffsets[0]}})
			return err
		}, "batch not compiled: 0 compiled for 1 added rules"},
		{"another rule's compiled form", func() error {
			other, _ := rule.Compile(rule.Rule{Condition: rule.Condition{Pattern: []byte("x")}, ReplyLen: 1})
			_, err := d.Apply(s1, model.Batch{Add: []rule.Rule{nineOffsets[0]}, AddCompiled: []rule.Compiled{other}})
			return err
		}, "not the rule's compiled form"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	var lim *rule.LimitError
	if _, err := d.AddRule(s1, long); !errors.As(err, &lim) || lim.Limit != 256 {
		t.Errorf("a limit error is a *rule.LimitError naming the limit, got %v", err)
	}
	for _, s := range []model.ServiceID{s1, s2} {
		got, err := d.Rules(s)
		if err != nil || len(got) != 1 {
			t.Errorf("service %d holds %d rules (%v), want the 1 it had", s, len(got), err)
		}
	}
}

// Only a bound UDP socket can become a service, and only once.
func TestAddServiceRefusals(t *testing.T) {
	d := openTest(t)
	c := boundUDP(t, "127.0.0.1:0")
	register(t, d, c)
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	unbound, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(unbound)
	notListening, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(notListening)
	if err := unix.Bind(notListening, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	rawUDP, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rawUDP)
	if err := unix.Bind(rawUDP, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		fd   func(func(fd uintptr))
		want string
	}{
		{"twice", control(t, c), "already registered"},
		{"multipath tcp", control(t, tcp), "Multipath TCP"}, // Go's default for listeners
		{"tcp not listening", func(f func(uintptr)) { f(uintptr(notListening)) }, "not listening"},
		{"unbound", func(f func(uintptr)) { f(uintptr(unbound)) }, "not bound"},
		{"raw socket of protocol udp", func(f func(uintptr)) { f(uintptr(rawUDP)) }, "not a datagram or stream socket"},
	} {
		var err error
		tc.fd(func(fd uintptr) { _, err = d.AddSocket(int(fd)) })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func control(t *testing.T, c syscall.Conn) func(func(fd uintptr)) {
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return func(f func(fd uintptr)) { raw.Control(f) }
}
