package daemon

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
)

// Clients that mean harm: what they send ends at worst their own
// connections, leaves santad holding nothing of theirs, and gains them
// nothing over other clients.

// Empty messages carrying a socket, sent over and over, each end its
// connection with EPROTO and leave santad no descriptor: the socket is
// really closed once its application closes it, and its port is free.
func TestEmptyMessagesWithDescriptors(t *testing.T) {
	e := newEnv(t, "he", "")
	before, err := e.d.OpenFDs()
	if err != nil {
		t.Fatal(err)
	}
	u := e.listenUDP(t)
	f := fileOf(t, u)
	for range 200 {
		c := dialRaw(t, e.d.Socket)
		c.sendEmpty(t, int(f.Fd()), int(f.Fd()))
		if perr, ok := c.reply(t).(*protocol.Error); !ok || perr.Code != syscall.EPROTO || !strings.Contains(perr.Message, "0 bytes") {
			t.Fatalf("an empty message gets %v; want EPROTO", perr)
		}
		c.closed(t)
		c.conn.Close()
	}
	waitFor(t, "santad to close what it was sent", 2*time.Second, func() bool {
		n, err := e.d.OpenFDs()
		return err == nil && n <= before
	})
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if held, err := e.d.HoldsSocket(st.Ino); err != nil || held {
		t.Fatalf("santad holds the socket: %v, %v", held, err)
	}
	port := portOf(u)
	f.Close()
	u.Close()
	err = e.ns.Do(func() error {
		again, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
		if err == nil {
			again.Close()
		}
		return err
	})
	if err != nil {
		t.Errorf("the port of the closed socket is still held: %v", err)
	}
}

// One uid at its quotas of services and rules leaves another uid its own,
// and neither may touch the other's service or rules, whatever request
// names them. The first client holds its services while the second runs.
func TestQuotaOfOneUIDLeavesOthersTheirs(t *testing.T) {
	e := newEnv(t, "hq", `{"quota_services": 2, "quota_rules": 5}`, "-socket-mode", "0666")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := []op{
		{"attach-new", "ok", "service="},
		{"add:mine:5:8", "ok", "ids="},
		{"attach-new", "ok", "service="},
		{"attach-new", "EDQUOT", "quota of 2 services for uid 65534 exceeded: 2 attached"},
		{"add:mine:1:8", "EDQUOT", "quota of 5 rules for uid 65534 exceeded: 5 installed, 1 more requested"},
	}
	holder := e.helperAs(ctx, nobody, nil, append(opArgs(first), "hold")...)
	holder.Stderr = os.Stderr
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	defer stdin.Close()
	out := bufio.NewScanner(stdout)
	var lines []string
	for len(lines) < len(first) && out.Scan() {
		lines = append(lines, out.Text())
	}
	msgs := checkOps(t, nobody, lines, first)
	svc := strings.TrimPrefix(msgs[0], "service=")
	rule := strings.Fields(strings.Trim(strings.TrimPrefix(msgs[1], "ids="), "[]"))[0]

	other := who{uid: 65533}
	e.runOps(t, other, nil, []op{
		{"attach-new", "ok", "service="},
		{"add:mine:5:8", "ok", "ids="},
		{"attach-new", "ok", "service="},
		{"detach:" + svc, "EPERM", "belongs to uid 65534, not to uid 65533"},
		{"add:" + svc + ":1:8", "EPERM", "belongs to uid 65534"},
		{"replace:" + svc + ":" + rule, "EPERM", "belongs to uid 65534"},
		{"delete:" + svc + ":" + rule, "EPERM", "belongs to uid 65534"},
		{"list:" + svc, "EPERM", "belongs to uid 65534"},
		{"begin:" + svc, "EPERM", "belongs to uid 65534"},
	})
}

// A member of admin_group, by a supplementary group it had when it
// connected, is an admin and may touch root's service; nobody without
// the group may not.
func TestAdminGroupMember(t *testing.T) {
	e := newEnv(t, "ha", `{"admin_group": "4242"}`, "-socket-mode", "0666")
	svc, err := e.client(t).Attach(e.listenUDP(t))
	if err != nil {
		t.Fatal(err)
	}
	detach := fmt.Sprintf("detach:%d", svc.ServiceID)
	e.runOps(t, nobody, nil, []op{
		{"hello", "ok", "uid=65534 admin=false"},
		{detach, "EPERM", "belongs to uid 0"},
	})
	e.runOps(t, who{uid: 65534, groups: "4242"}, nil, []op{
		{"hello", "ok", "uid=65534 admin=true quota_rules=0 quota_bytes=0"},
		{"services", "ok", fmt.Sprintf("ids=%d", svc.ServiceID)},
		{detach, "ok", ""},
	})
}
