package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// helperEnv, when set, makes this test binary a client of santad instead:
//
//	daemon.test SOCKET app          attach a new UDP socket, install pingRule,
//	                                print "ready service=S port=P", sleep
//	daemon.test SOCKET ops OP...    run each OP, print "OP RESULT MESSAGE"
//
// RESULT is "ok" or the errno's name. OPs: hello, services, attach-fd:N
// (the inherited descriptor N), attach-new (a new socket of its own, from
// then on "mine"), detach:S, add:S:COUNT:REPLYLEN, replace:S:RULE,
// delete:S:RULE, list:S, begin:S, stats:S, where S is a service id or
// "mine", and hold (wait for the end of stdin, holding what was attached).
const helperEnv = "SANTA_DAEMON_TEST_HELPER"

// op is a helper op and what it must give: its RESULT, and text its
// MESSAGE holds.
type op struct{ op, result, msg string }

// runOps runs ops in a helper as w, with files as descriptors 3, 4, ...,
// checks what each gives and returns the messages, by op.
func (e *env) runOps(t *testing.T, w who, files []*os.File, ops []op) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := e.helperAs(ctx, w, files, opArgs(ops)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	return checkOps(t, w, strings.Split(strings.TrimSpace(string(out)), "\n"), ops)
}

// opArgs are the helper's arguments for ops.
func opArgs(ops []op) []string {
	args := []string{"ops"}
	for _, o := range ops {
		args = append(args, o.op)
	}
	return args
}

// checkOps checks the lines a helper running as w printed against ops and
// returns their messages, by op.
func checkOps(t *testing.T, w who, lines []string, ops []op) []string {
	t.Helper()
	if len(lines) != len(ops) {
		t.Fatalf("helper printed %d lines for %d ops:\n%s", len(lines), len(ops), strings.Join(lines, "\n"))
	}
	msgs := make([]string, len(ops))
	for i, o := range ops {
		t.Logf("as uid %d: %s", w.uid, lines[i])
		name, rest, _ := strings.Cut(lines[i], " ")
		result, msg, _ := strings.Cut(rest, " ")
		if name != o.op || result != o.result || !strings.Contains(msg, o.msg) {
			t.Errorf("%s: got %s %q; want %s with %q", o.op, result, msg, o.result, o.msg)
		}
		msgs[i] = msg
	}
	return msgs
}

func runHelper(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "helper: want SOCKET MODE ...")
		return 2
	}
	c, err := client.Dial(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	defer c.Close()
	switch args[1] {
	case "app":
		err = app(c)
	case "ops":
		h := &opsHelper{c: c}
		for i, op := range args[2:] {
			msg, err := h.run(i, op)
			result := "ok"
			var e *client.Error
			if errors.As(err, &e) {
				result, msg = protocol.ErrnoName(e.Code), e.Message
			} else if err != nil {
				result, msg = "FAILED", err.Error()
			}
			fmt.Printf("%s %s %s\n", op, result, msg)
		}
	default:
		err = fmt.Errorf("unknown mode %q", args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// app is an application that offloads pingRule and never reads its
// socket, until it is killed.
func app(c *client.Client) error {
	u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	svc, err := c.Attach(u)
	if err != nil {
		return err
	}
	if _, err := c.AddRules(svc.ServiceID, []rule.Rule{pingRule}); err != nil {
		return err
	}
	fmt.Printf("ready service=%d port=%d\n", svc.ServiceID, svc.Port)
	time.Sleep(time.Hour)
	runtime.KeepAlive(u)
	return nil
}

type opsHelper struct {
	c    *client.Client
	mine uint32
	keep []*net.UDPConn // sockets attached: they must stay open
}

func (h *opsHelper) run(i int, op string) (string, error) {
	f := strings.Split(op, ":")
	num := func(k int) uint32 {
		if k >= len(f) {
			return 0
		}
		if f[k] == "mine" {
			return h.mine
		}
		n, _ := strconv.ParseUint(f[k], 10, 32)
		return uint32(n)
	}
	switch f[0] {
	case "hello":
		s := h.c.Session()
		return fmt.Sprintf("uid=%d admin=%t quota_rules=%d quota_bytes=%d", s.UID, s.Admin, s.QuotaRules, s.QuotaBytes), nil
	case "services":
		svcs, err := h.c.Services()
		var ids []string
		for _, s := range svcs {
			ids = append(ids, strconv.Itoa(int(s.ServiceID)))
		}
		return "ids=" + strings.Join(ids, ","), err
	case "attach-fd":
		s, err := h.c.AttachFD(int(num(1)))
		return fmt.Sprintf("service=%d", s.ServiceID), err
	case "attach-new":
		u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return "", err
		}
		h.keep = append(h.keep, u)
		s, err := h.c.Attach(u)
		if err != nil {
			return "", err
		}
		h.mine = s.ServiceID
		return fmt.Sprintf("service=%d", s.ServiceID), nil
	case "detach":
		return "", h.c.Detach(num(1))
	case "learn":
		return "", h.c.SetLearning(num(1), client.Learning{KeyOffset: 2, Enabled: true})
	case "hot":
		set, err := h.c.Hot(num(1), 10)
		return fmt.Sprintf("requests=%d", len(set.Requests)), err
	case "add":
		rs := make([]rule.Rule, num(2))
		for k := range rs {
			rs[k] = rule.Rule{
				Condition:  rule.Condition{Pattern: []byte(fmt.Sprintf("op%02d-%04d", i, k))},
				Processors: []rule.Processor{rule.Put(0, []byte("R"))},
				ReplyLen:   uint16(num(3)),
			}
		}
		ids, err := h.c.AddRules(num(1), rs)
		return fmt.Sprintf("ids=%v", ids), err
	case "replace":
		return "", h.c.ReplaceRules(num(1), []client.RuleEntry{{RuleID: num(2), Rule: pingRule}})
	case "delete":
		return "", h.c.DeleteRules(num(1), []uint32{num(2)})
	case "list":
		n := 0
		for _, err := range h.c.Rules(num(1)) {
			if err != nil {
				return "", err
			}
			n++
		}
		return fmt.Sprintf("rules=%d", n), nil
	case "begin":
		_, err := h.c.Begin(num(1))
		return "", err
	case "stats":
		_, err := h.c.ServiceStats(num(1))
		return "", err
	case "hold":
		_, err := io.Copy(io.Discard, os.Stdin)
		return "", err
	}
	return "", fmt.Errorf("unknown op %q", op)
}
