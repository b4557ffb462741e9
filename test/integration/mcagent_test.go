package integration

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/netproc"
	"github.com/santa-offload/santa/internal/offload/mcagent"
	"github.com/santa-offload/santa/internal/santadtest"
)

// The memcached agent end to end: Debian's memcached (UDP on) in the rig's
// server namespace, santad on the rig's veth there, and `santa-offload
// memcached` (the command, built) next to them. A client in the client
// namespace sends UDP gets with Zipf popularity and checks every reply
// byte for byte against what memcached holds (the test's model, itself
// checked against memcached before the agent starts); writes go over TCP.
// After every acknowledged write the next get must see it, whoever
// answers.
const (
	mcPort      = 11211                  // memcached's TCP and UDP port in every memcached test here
	mcKeys      = 200                    // keys stored
	mcMaxRules  = 50                     // the agent's top N
	mcWindow    = "200ms"                // the agent's window: short, to race writes with re-learning
	mcLearnWait = 15 * time.Second       // traffic until the agent must have offloaded
	mcAttach    = time.Second            // the documented bound on following a restart
	mcTimeout   = 500 * time.Millisecond // a UDP get's wait for its reply
)

// mcRig is memcached, santad and the agent.
type mcRig struct {
	r      *rig
	dir    string
	santad *santadtest.Santad
	mc     *netproc.Proc
	ready  time.Time // when memcached last took a connection after starting
	agent  *mcAgentProc
	bin    string
	logs   *lockedBuffer
	udp    *net.UDPConn
	tcp    *mcTCP
	model  map[string]string // key to value, as memcached holds them
	id     uint16            // the last UDP request id
	zipf   *rand.Zipf
}

func TestMemcachedAgent(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("starts memcached and loads it")
	}
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Fatal("memcached is not installed (make test-deps)")
	}
	m := startMCRig(t)
	m.waitOffloaded(t, "k:0000")
	m.steady(t)
	m.otherForms(t)
	m.writes(t)
	m.racingWrites(t)
	m.expiry(t)
	m.flushAll(t)
	m.restartMemcached(t)
	m.restartSantad(t)
	m.killAgent(t)
	m.stopAgent(t)
}

func startMCRig(t *testing.T) *mcRig {
	t.Helper()
	m := &mcRig{r: newRig(t, "m"), dir: t.TempDir(), logs: &lockedBuffer{}, model: map[string]string{},
		zipf: rand.NewZipf(rand.New(rand.NewSource(1)), 1.1, 1, mcKeys-1)}
	attachXDPPass(t, m.r.cli, m.r.cliDev)
	bin, err := santadtest.Build(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.bin, err = santadtest.BuildCommand(m.dir, "santa-offload"); err != nil {
		t.Fatal(err)
	}
	m.santad = santadtest.New(bin, &santadtest.Netns{Name: m.r.srv}, m.dir, santadtest.PinPath("mcagent"), "-interfaces", m.r.srvDev)
	if err := m.santad.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.santad.Close(); err != nil {
			t.Error(err)
		}
	})
	m.startMemcached(t, 1)
	m.udp = dialIn(t, m.r.cli, fmt.Sprintf("%s:%d", serverIPv4, mcPort))
	// memcached's own replies are the model's bytes.
	for i := range mcKeys {
		k := mcKey(i)
		if got, want := m.getRaw(t, k), m.expect(k); !bytes.Equal(got, want) {
			t.Fatalf("memcached answers %q, the model %q", got, want)
		}
	}
	m.startAgent(t)
	m.waitAttached(t, nil)
	// After the listener was marked: a connection from before would hold
	// every guarded rule back while it lives.
	m.tcp = m.dialTCP(t)
	return m
}

func mcKey(i int) string { return fmt.Sprintf("k:%04d", i) }

// startMemcached starts memcached and stores every key, its value of
// generation gen, over a connection it then closes.
func (m *mcRig) startMemcached(t *testing.T, gen int) {
	t.Helper()
	argv := []string{"memcached", "-u", "nobody", "-l", serverIPv4, "-p", fmt.Sprint(mcPort), "-U", fmt.Sprint(mcPort),
		"-t", "2", "-m", "64", "-c", "256"}
	var conn *mcTCP
	mc, err := netproc.Start(netproc.Spec{Name: "memcached", Argv: argv, Netns: m.r.srv, LogPath: filepath.Join(m.dir, "memcached.log"),
		Ready: func() (err error) {
			conn, err = m.tryDialTCP()
			m.ready = time.Now()
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	m.mc = mc
	t.Cleanup(func() { mc.Stop() })
	defer conn.Close()
	for i := range mcKeys {
		k := mcKey(i)
		m.model[k] = fmt.Sprintf("v%d-%d", gen, i)
		conn.command(t, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(m.model[k]), m.model[k]), "STORED\r\n")
	}
}

// startAgent runs `santa-offload memcached` in the server namespace's view.
func (m *mcRig) startAgent(t *testing.T) {
	t.Helper()
	cmd := exec.Command(m.bin, "memcached", "-netns", netns.Named(m.r.srv), "-socket", m.santad.Socket,
		"-port", fmt.Sprint(mcPort), "-max-rules", fmt.Sprint(mcMaxRules), "-window", mcWindow, "-log-every", "1s")
	cmd.Stdout, cmd.Stderr = m.logs, m.logs
	a := &mcAgentProc{cmd: cmd}
	done, err := startTied(cmd, nil, func(err error) { a.err = err })
	if err != nil {
		t.Fatal(err)
	}
	a.done = done
	m.agent = a
	t.Cleanup(func() { a.signal(syscall.SIGKILL) })
}

// mcAgentProc is a running agent.
type mcAgentProc struct {
	cmd  *exec.Cmd
	done <-chan struct{}
	err  error // its exit status, once done
}

// signal sends sig and waits until the agent has exited, returning its
// exit status.
func (a *mcAgentProc) signal(sig syscall.Signal) error {
	select {
	case <-a.done:
	default:
		a.cmd.Process.Signal(sig)
		<-a.done
	}
	return a.err
}

// services are santad's services of memcached's port.
func (m *mcRig) services(t *testing.T) []client.ServiceInfo {
	t.Helper()
	c := m.client(t)
	defer c.Close()
	all, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	var out []client.ServiceInfo
	for _, s := range all {
		if s.Port == mcPort {
			out = append(out, s)
		}
	}
	return out
}

func (m *mcRig) client(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(m.santad.Socket)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitAttached waits until the agent manages memcached's TCP listener and
// UDP socket, none of whose cookies is in old, and has marked them (the
// UDP socket is marked after the listener: a connection the listener
// accepted before would hold the domain back while it lives), and returns
// when it saw that.
func (m *mcRig) waitAttached(t *testing.T, old map[uint64]bool) time.Time {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var tcp, udp int
		var udpID uint32
		for _, s := range m.services(t) {
			if s.Manager == mcagent.ClientName && !old[s.Cookie] {
				if s.Protocol == syscall.IPPROTO_TCP {
					tcp++
				} else {
					udp, udpID = udp+1, s.ServiceID
				}
			}
		}
		if tcp == 1 && udp == 1 && m.marked(t, udpID) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent attached %d listeners and %d UDP sockets in 10 s\nagent log:\n%s", tcp, udp, m.logs.String())
		}
	}
}

// marked is whether service id is memcached's.
func (m *mcRig) marked(t *testing.T, id uint32) bool {
	t.Helper()
	c := m.client(t)
	defer c.Close()
	_, err := c.MemcachedStats(id)
	return err == nil
}

// udpService is the UDP service's id.
func (m *mcRig) udpService(t *testing.T) uint32 {
	t.Helper()
	for _, s := range m.services(t) {
		if s.Protocol == syscall.IPPROTO_UDP {
			return s.ServiceID
		}
	}
	t.Fatal("no UDP service")
	return 0
}

// counts are the UDP service's matched and passed requests.
func (m *mcRig) counts(t *testing.T) (matched, passed uint64) {
	t.Helper()
	c := m.client(t)
	defer c.Close()
	st, err := c.ServiceStats(m.udpService(t))
	if err != nil {
		t.Fatal(err)
	}
	return st.Matched, st.Passed
}

// ruleHits is the hits of the rule answering key, and whether there is one.
func (m *mcRig) ruleHits(t *testing.T, key string) (uint64, bool) {
	t.Helper()
	r, ok := m.rule(t, key)
	return r.hits, ok
}

// listedRule is a rule as santad lists it: its id, the epoch its guard
// was built at (the domain's life: an agent's start begins a new one) and
// its hits.
type listedRule struct {
	id, epoch uint32
	hits      uint64
}

// rule is the rule answering key, and whether there is one.
func (m *mcRig) rule(t *testing.T, key string) (r listedRule, ok bool) {
	t.Helper()
	c := m.client(t)
	defer c.Close()
	svc := m.udpService(t)
	for e, err := range c.Rules(svc) {
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasSuffix(e.Rule.Condition.Pattern, []byte("get "+key+"\r\n")) {
			r.id, ok = e.RuleID, true
			if e.Guard != nil {
				r.epoch = e.Guard.Epoch
			}
		}
	}
	if !ok {
		return listedRule{}, false
	}
	for rc, err := range c.RuleStats(svc) {
		if err != nil {
			t.Fatal(err)
		}
		if rc.RuleID == r.id {
			r.hits = rc.Hits
			return r, true
		}
	}
	return listedRule{}, false
}

// expect is memcached's reply to a get of key as the model has it, after
// the frame header.
func (m *mcRig) expect(key string) []byte {
	v, ok := m.model[key]
	if !ok {
		return []byte("END\r\n")
	}
	return fmt.Appendf(nil, "VALUE %s 0 %d\r\n%s\r\nEND\r\n", key, len(v), v)
}

// getRaw asks key over UDP and returns the reply after its frame header,
// which must be the request's id, datagram 0 of 1.
func (m *mcRig) getRaw(t *testing.T, key string) []byte {
	t.Helper()
	for try := 0; ; try++ {
		m.id++
		req := binary.BigEndian.AppendUint16(nil, m.id)
		req = append(append(req, 0, 0, 0, 1, 0, 0), "get "+key+"\r\n"...)
		m.udp.SetDeadline(time.Now().Add(mcTimeout))
		if _, err := m.udp.Write(req); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2048)
		for {
			n, err := m.udp.Read(buf)
			if err != nil && try < 3 {
				break // lost: asked again with another id
			}
			if err != nil {
				t.Fatalf("get %s: no reply in 4 tries: %v", key, err)
			}
			if n < 8 || binary.BigEndian.Uint16(buf) != m.id {
				continue // a late reply to an earlier try
			}
			if !bytes.Equal(buf[2:8], []byte{0, 0, 0, 1, 0, 0}) {
				t.Fatalf("get %s: frame header % x", key, buf[:8])
			}
			return bytes.Clone(buf[8:n])
		}
	}
}

// get asks key and fails the test unless the reply is the model's.
func (m *mcRig) get(t *testing.T, key, when string) {
	t.Helper()
	if got, want := m.getRaw(t, key), m.expect(key); !bytes.Equal(got, want) {
		t.Fatalf("%s: get %s answered %q; memcached holds %q\nagent log:\n%s", when, key, got, want, m.logs.String())
	}
}

// load sends n checked gets of Zipf-popular keys.
func (m *mcRig) load(t *testing.T, n int, when string) {
	t.Helper()
	for range n {
		m.get(t, mcKey(int(m.zipf.Uint64())), when)
	}
}

// waitOffloaded sends traffic until key has a rule that answered.
func (m *mcRig) waitOffloaded(t *testing.T, key string) {
	t.Helper()
	deadline := time.Now().Add(mcLearnWait)
	for {
		m.load(t, 2000, "learning")
		m.get(t, key, "learning")
		if hits, ok := m.ruleHits(t, key); ok && hits > 0 {
			return
		}
		if time.Now().After(deadline) {
			m.agent.signal(syscall.SIGQUIT) // its goroutines, to the log
			t.Fatalf("%s not offloaded after %v of traffic\nagent log:\n%s", key, mcLearnWait, m.logs.String())
		}
	}
}

// steady: with the hot keys offloaded, the kernel answers most gets, each
// byte for byte memcached's.
func (m *mcRig) steady(t *testing.T) {
	t.Helper()
	matched0, passed0 := m.counts(t)
	m.load(t, 20000, "steady")
	matched, passed := m.counts(t)
	matched, passed = matched-matched0, passed-passed0
	t.Logf("steady: kernel answered %d, memcached %d", matched, passed)
	if matched < passed {
		t.Errorf("the kernel answered %d gets and memcached %d: the hot keys are not offloaded", matched, passed)
	}
}

// otherForms: hot requests the agent must not offload (several keys,
// gets, other spacing, several datagrams, the binary protocol) are
// answered by memcached as before, and get no rule; a multi-key get's
// reply is checked against the model.
func (m *mcRig) otherForms(t *testing.T) {
	t.Helper()
	frame := "\x00\x00\x00\x01\x00\x00"
	answered := []string{frame + "get k:0000 k:0001\r\n", frame + "gets k:0000\r\n", frame + "get  k:0000\r\n",
		frame + "get k:0000\n"}
	dropped := []string{
		"\x00\x01\x00\x02\x00\x00get k:0000\r\n",                                         // datagram 1 of 2
		frame + "\x80\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00\x06\x00\x00\x00\x00k:0000", // a binary get
	}
	multi := append(bytes.TrimSuffix(m.expect("k:0000"), []byte("END\r\n")), m.expect("k:0001")...)
	for range 1000 {
		for i, f := range answered {
			got := m.ask(t, f)
			if got == nil {
				t.Fatalf("memcached did not answer %q", f)
			}
			if i == 0 && !bytes.Equal(got, multi) {
				t.Fatalf("the get of two keys answered %q; want %q", got, multi)
			}
		}
		for _, f := range dropped {
			m.id++
			m.udp.Write(append(binary.BigEndian.AppendUint16(nil, m.id), f...))
		}
	}
	m.load(t, 2000, "other forms") // a window or two
	for id, e := range m.rulesNow(t) {
		if p := e.Rule.Condition.Pattern; !bytes.HasPrefix(p, []byte(frame+"get k:")) ||
			bytes.Count(p, []byte(" ")) != 1 || !bytes.HasSuffix(p, []byte("\r\n")) {
			t.Errorf("rule %d matches %q, no single-key get", id, p)
		}
	}
}

// ask sends form (a request after its id) over UDP with a fresh id and
// returns the reply's payloads put together up to END (memcached sends a
// datagram per value, each "0 of 1"), or nil if none came.
func (m *mcRig) ask(t *testing.T, form string) []byte {
	t.Helper()
	m.id++
	req := append(binary.BigEndian.AppendUint16(nil, m.id), form...)
	m.udp.SetDeadline(time.Now().Add(mcTimeout))
	if _, err := m.udp.Write(req); err != nil {
		t.Fatal(err)
	}
	var out []byte
	buf := make([]byte, 2048)
	for !bytes.HasSuffix(out, []byte("END\r\n")) {
		n, err := m.udp.Read(buf)
		if err != nil {
			return nil
		}
		if n >= 8 && bytes.Equal(buf[:2], req[:2]) {
			out = append(out, buf[8:n]...)
		}
	}
	return out
}

// rulesNow are the UDP service's rules by id.
func (m *mcRig) rulesNow(t *testing.T) map[uint32]client.RuleEntry {
	t.Helper()
	c := m.client(t)
	defer c.Close()
	out := map[uint32]client.RuleEntry{}
	for e, err := range c.Rules(m.udpService(t)) {
		if err != nil {
			t.Fatal(err)
		}
		out[e.RuleID] = e
	}
	return out
}

// writes: each kind of write to an offloaded key, acknowledged over TCP;
// the next get sees it.
func (m *mcRig) writes(t *testing.T) {
	t.Helper()
	steps := []struct {
		key, cmd, reply string
		value           *string // nil: deleted
	}{
		{"k:0000", "set k:0000 0 0 5\r\nfresh\r\n", "STORED\r\n", ptr("fresh")},
		{"k:0001", "delete k:0001\r\n", "DELETED\r\n", nil},
		{"k:0002", "touch k:0002 100\r\n", "TOUCHED\r\n", ptr(m.model["k:0002"])},
		{"k:0003", "ms k:0003 4\r\nmeta\r\n", "HD\r\n", ptr("meta")},
		{"k:0004", "append k:0004 0 0 1\r\n+\r\n", "STORED\r\n", ptr(m.model["k:0004"] + "+")},
	}
	for _, s := range steps {
		m.waitOffloaded(t, s.key)
		m.tcp.command(t, s.cmd, s.reply)
		if s.value == nil {
			delete(m.model, s.key)
		} else {
			m.model[s.key] = *s.value
		}
		for range 3 {
			m.get(t, s.key, "after "+strings.Fields(s.cmd)[0])
		}
	}
	// Offloaded again with the new values.
	m.waitOffloaded(t, "k:0000")
	m.waitOffloaded(t, "k:0003")
}

func ptr(s string) *string { return &s }

// racingWrites: for 3 s, sets of hot keys, each followed by gets of it,
// among Zipf traffic: the agent keeps re-learning the keys written while
// they are written. Every get sees the last acknowledged set.
func (m *mcRig) racingWrites(t *testing.T) {
	t.Helper()
	matched0, _ := m.counts(t)
	writes := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); writes++ {
		k := mcKey(int(m.zipf.Uint64()) % 10)
		v := fmt.Sprintf("w%d", writes)
		m.tcp.command(t, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(v), v), "STORED\r\n")
		m.model[k] = v
		m.get(t, k, "racing writes")
		m.load(t, 50, "racing writes")
	}
	matched, _ := m.counts(t)
	t.Logf("racing writes: %d sets, the kernel answered %d gets meanwhile", writes, matched-matched0)
	if matched == matched0 {
		t.Errorf("the kernel answered no get while keys were written: the agent did not re-learn them (domain %+v)\nagent log:\n%s",
			m.memcachedStats(t), m.logs.String())
	}
}

// expiry: a hot key set with exptime 8 is offloaded and answered by the
// kernel until its rule's deadline (guard_expired counts the gets it then
// passed); no get is answered its value after memcached said it had none.
// (8, not 3: the kernel's hot set covers about a second, the agent's
// window comes after, and memcached's clock may lag by up to 2 s, so the
// agent gives a rule the time to live it read less 2 s: a key with 3 s
// to live is seldom offloaded before it is gone.)
func (m *mcRig) expiry(t *testing.T) {
	t.Helper()
	const k = "ttl:0"
	expired0 := m.memcachedStats(t).GuardExpired
	matched0, _ := m.counts(t) // only k is asked from here on
	m.tcp.command(t, "set "+k+" 0 8 3\r\nttl\r\n", "STORED\r\n")
	m.model[k] = "ttl"
	gone := false
	for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline) && !gone; {
		got := m.getRaw(t, k)
		switch {
		case string(got) == "END\r\n":
			gone = true
		case !bytes.Equal(got, m.expect(k)):
			t.Fatalf("get %s answered %q", k, got)
		}
	}
	delete(m.model, k)
	if !gone {
		t.Fatalf("%s did not expire within 12 s", k)
	}
	for range 1000 {
		m.get(t, k, "after expiry")
	}
	// Its rule's hits: the rule itself may be gone by now (read again
	// after its deadline, memcached no longer had it).
	matched, _ := m.counts(t)
	hits := matched - matched0
	expired := m.memcachedStats(t).GuardExpired - expired0
	t.Logf("expiry: the kernel answered %s %d times; %d gets passed for the rule's deadline", k, hits, expired)
	if hits == 0 || expired == 0 {
		t.Errorf("%s was not offloaded until its deadline: %d kernel answers, %d gets past the deadline\nagent log:\n%s",
			k, hits, expired, m.logs.String())
	}
}

// memcachedStats are the domain's counters.
func (m *mcRig) memcachedStats(t *testing.T) client.MemcachedStats {
	t.Helper()
	c := m.client(t)
	defer c.Close()
	st, err := c.MemcachedStats(m.udpService(t))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// flushAll: flush_all empties memcached; no offloaded key answers its old
// value; stored again, the keys are answered their new values.
func (m *mcRig) flushAll(t *testing.T) {
	t.Helper()
	m.waitOffloaded(t, "k:0000")
	m.tcp.command(t, "flush_all\r\n", "OK\r\n")
	m.model = map[string]string{}
	for i := range mcMaxRules {
		m.get(t, mcKey(i), "after flush_all")
	}
	for i := range mcKeys {
		k := mcKey(i)
		m.model[k] = fmt.Sprintf("v2-%d", i)
		m.tcp.command(t, fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(m.model[k]), m.model[k]), "STORED\r\n")
	}
	m.waitOffloaded(t, "k:0000")
}

// restartMemcached: memcached is killed and started again with other
// values; the agent attaches its new sockets within mcAttach, and no get
// is answered a value of the old process.
func (m *mcRig) restartMemcached(t *testing.T) {
	t.Helper()
	old := map[uint64]bool{}
	for _, s := range m.services(t) {
		old[s.Cookie] = true
	}
	m.tcp.Close()
	syscall.Kill(m.mc.Pid(), syscall.SIGKILL)
	<-m.mc.Done()
	for i := range 5 {
		if got := m.tryGet(mcKey(i)); got != nil {
			t.Fatalf("get %s answered %q with memcached down", mcKey(i), got)
		}
	}
	m.startMemcached(t, 3)
	took := m.waitAttached(t, old).Sub(m.ready)
	t.Logf("restart: the agent attached the new sockets %v after memcached took a connection", took)
	if took > mcAttach {
		t.Errorf("the agent took %v to attach the restarted memcached's sockets; the bound is %v", took, mcAttach)
	}
	m.tcp = m.dialTCP(t)
	m.load(t, 2000, "after the restart")
	m.waitOffloaded(t, "k:0000")
}

// restartSantad: santad is killed and started again. It keeps memcached's
// services (its journal) but neither their marking nor their guarded
// rules; the agent reconnects, marks them again and offloads again.
// Connections memcached accepted before hold the domain back until they
// close: the test's own is closed and dialled again once the agent has
// marked the services.
func (m *mcRig) restartSantad(t *testing.T) {
	t.Helper()
	before := m.services(t)
	m.santad.Kill()
	if err := m.santad.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !m.marked(t, m.udpService(t)); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not mark memcached's services again within 10 s\nagent log:\n%s", m.logs.String())
		}
	}
	m.tcp.Close()
	m.tcp = m.dialTCP(t)
	m.tcp.command(t, "set k:0000 0 0 7\r\nrestart\r\n", "STORED\r\n")
	m.model["k:0000"] = "restart"
	m.get(t, "k:0000", "santad restarted")
	m.waitOffloaded(t, "k:0000")
	if after := m.services(t); !reflect.DeepEqual(ids(before), ids(after)) {
		t.Errorf("services before santad's restart %v, after %v; want the same", ids(before), ids(after))
	}
}

func ids(svcs []client.ServiceInfo) []uint32 {
	var out []uint32
	for _, s := range svcs {
		out = append(out, s.ServiceID)
	}
	return out
}

// tryGet is one get of key without retries: its reply, or nil if none
// came in mcTimeout.
func (m *mcRig) tryGet(key string) []byte {
	m.id++
	req := binary.BigEndian.AppendUint16(nil, m.id)
	req = append(append(req, 0, 0, 0, 1, 0, 0), "get "+key+"\r\n"...)
	m.udp.SetDeadline(time.Now().Add(mcTimeout))
	m.udp.Write(req)
	buf := make([]byte, 2048)
	n, err := m.udp.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

// killAgent: the agent is killed (SIGKILL). Its services and guarded rules
// stay in santad and go on being invalidated by writes in the data plane:
// a set of an offloaded key is seen at once, and its rule never answers
// the old value again (every reply of the load is checked against
// memcached's value; the rule may answer the set's, docs/memcached.md
// "Answering after a set"). Started again, the agent
// takes the services up (same services), marks them anew (a new life: no
// rule of before answers) and offloads again.
func (m *mcRig) killAgent(t *testing.T) {
	t.Helper()
	before := m.services(t)
	m.agent.signal(syscall.SIGKILL)
	old, ok := m.rule(t, "k:0000")
	if !ok {
		t.Fatal("the killed agent's rule of k:0000 is gone")
	}
	if old.epoch == 0 {
		t.Fatal("the killed agent's rule of k:0000 has no guard")
	}
	m.tcp.command(t, "set k:0000 0 0 6\r\norphan\r\n", "STORED\r\n")
	m.model["k:0000"] = "orphan"
	m.load(t, 2000, "agent killed")
	m.get(t, "k:0000", "agent killed")
	m.startAgent(t)
	deadline := time.Now().Add(mcLearnWait)
	for {
		m.load(t, 2000, "agent restarted")
		// A new life's rule: santad reuses the ids of deleted rules, so
		// the new rule may well have the old one's.
		r, ok := m.rule(t, "k:0000")
		if ok && r.epoch != old.epoch && r.hits > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted agent did not offload k:0000 again in %v (its rule before the kill %+v; now %+v, listed %v)\nagent log:\n%s",
				mcLearnWait, old, r, ok, m.logs.String())
		}
	}
	after := m.services(t)
	if len(after) != len(before) {
		t.Fatalf("services before the kill %+v, after the restart %+v", before, after)
	}
	for i := range before {
		if before[i].ServiceID != after[i].ServiceID {
			t.Errorf("service %d became %d: the restarted agent did not take it up", before[i].ServiceID, after[i].ServiceID)
		}
	}
	m.load(t, 5000, "agent restarted")
}

// stopAgent: SIGTERM detaches the services.
func (m *mcRig) stopAgent(t *testing.T) {
	t.Helper()
	if err := m.agent.signal(syscall.SIGTERM); err != nil {
		t.Errorf("agent: %v\n%s", err, m.logs.String())
	}
	if s := m.services(t); len(s) != 0 {
		t.Errorf("services left after the agent stopped: %+v", s)
	}
	m.load(t, 1000, "agent stopped")
	if strings.Contains(m.santad.Log(), "level=ERROR") {
		t.Errorf("santad logged errors:\n%s", m.santad.Log())
	}
	t.Logf("agent log:\n%s", lastLines(m.logs.String(), 5))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// mcTCP is a TCP connection to memcached from the client namespace.
type mcTCP struct {
	net.Conn
	r *bufio.Reader
}

func (m *mcRig) tryDialTCP() (*mcTCP, error) {
	var conn net.Conn
	err := inNetns(m.r.cli, func() (err error) {
		conn, err = net.DialTimeout("tcp", fmt.Sprintf("%s:%d", serverIPv4, mcPort), 2*time.Second)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &mcTCP{Conn: conn, r: bufio.NewReader(conn)}, nil
}

func (m *mcRig) dialTCP(t *testing.T) *mcTCP {
	t.Helper()
	c, err := m.tryDialTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// command sends cmd and checks memcached's one-line reply.
func (c *mcTCP) command(t *testing.T, cmd, want string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		t.Fatal(err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil || line != want {
		t.Fatalf("%q: memcached answers %q, %v; want %q", strings.TrimSpace(cmd), line, err, want)
	}
}
