package daemon

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/rule"
)

// A client that is not root may attach only a socket it holds, touch only
// its uid's services, and install no more than its quota; the refusals say
// why. The client is a helper process running as nobody.
func TestNonRootClient(t *testing.T) {
	e := newEnv(t, "o", `{"quotas": {"65534": {"rules": 5, "bytes": 300, "services": 1}}}`, "-socket-mode", "0666")
	root := e.client(t)
	rootSock := e.listenUDP(t)
	svc, err := root.Attach(rootSock)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := root.AddRules(svc.ServiceID, []rule.Rule{pingRule})
	if err != nil {
		t.Fatal(err)
	}
	// A socket of the host's network namespace, which santad cannot serve.
	hostSock, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer hostSock.Close()
	files := []*os.File{fileOf(t, rootSock), fileOf(t, hostSock)} // descriptors 3 and 4

	theirs := svc.ServiceID
	ops := []op{
		{"hello", "ok", "uid=65534 admin=false quota_rules=5 quota_bytes=300"},
		// Root's socket, handed over: holding it is not enough, it is attached.
		{"attach-fd:3", "EEXIST", "already registered"},
		{"attach-fd:4", "EOPNOTSUPP", "another network namespace"},
		{"attach-new", "ok", "service="},
		{"services", "ok", ""}, // checked below: its own only
		{fmt.Sprintf("detach:%d", theirs), "EPERM", "belongs to uid 0, not to uid 65534"},
		{fmt.Sprintf("add:%d:1:8", theirs), "EPERM", "belongs to uid 0"},
		{fmt.Sprintf("replace:%d:%d", theirs, ids[0]), "EPERM", "belongs to uid 0"},
		{fmt.Sprintf("delete:%d:%d", theirs, ids[0]), "EPERM", "belongs to uid 0"},
		{fmt.Sprintf("list:%d", theirs), "EPERM", "belongs to uid 0"},
		{fmt.Sprintf("begin:%d", theirs), "EPERM", "belongs to uid 0"},
		{fmt.Sprintf("stats:%d", theirs), "EPERM", "belongs to uid 0"},
		// Hot requests are other clients' requests: the owner's alone.
		{fmt.Sprintf("learn:%d", theirs), "EPERM", "belongs to uid 0"},
		{fmt.Sprintf("hot:%d", theirs), "EPERM", "belongs to uid 0"},
		{"add:mine:6:8", "EDQUOT", "quota of 5 rules for uid 65534 exceeded: 0 installed, 6 more requested"},
		{"add:mine:1:400", "EDQUOT", "quota of 300 bytes for uid 65534 exceeded: 0 installed, 409 more requested"},
		{"add:mine:2:8", "ok", "ids="},
		{"list:mine", "ok", "rules=2"},
		{"attach-new", "EDQUOT", "quota of 1 services for uid 65534 exceeded: 1 attached"},
	}
	msgs := e.runOps(t, nobody, files, ops)
	// ops[3] attached nobody's service; ops[4] listed the services.
	if mine := strings.TrimPrefix(msgs[3], "service="); msgs[4] != "ids="+mine {
		t.Errorf("nobody lists services %q; want only its own, %s", msgs[4], mine)
	}

	// Root's service is untouched; nobody's ended with its process.
	rs := 0
	for _, err := range root.Rules(theirs) {
		if err != nil {
			t.Fatal(err)
		}
		rs++
	}
	if rs != 1 {
		t.Errorf("root's service has %d rules, want 1", rs)
	}
	waitFor(t, "nobody's service to end with its socket", time.Second, func() bool {
		svcs, err := root.Services()
		return err == nil && len(svcs) == 1 && svcs[0].ServiceID == theirs
	})
}

// fileOf is a descriptor of a socket to hand to a child process.
func fileOf(t *testing.T, u *net.UDPConn) *os.File {
	t.Helper()
	f, err := u.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
	}
}
