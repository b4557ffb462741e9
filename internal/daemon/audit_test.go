package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

// syncBuffer is a buffer the server's goroutines write and the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// auditFields are the fields of a "rules changed" line the test compares.
var auditFields = []string{"client", "pid", "uid", "service", "protocol", "owner_uid", "added", "replaced", "deleted", "txn", "rules"}

// changes are the "rules changed" lines of log, with auditFields only.
func changes(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] != "rules changed" {
			continue
		}
		if m["level"] != "INFO" || m["addr"] == nil {
			t.Errorf("audit line %q", line)
		}
		kept := map[string]any{}
		for _, f := range auditFields {
			kept[f] = m[f]
		}
		out = append(out, kept)
	}
	return out
}

// Every change of rules is logged in one line, a batch's or a
// transaction's at COMMIT, with who made it, on which service, and how
// many rules it added, replaced and deleted; refused and staged ones are
// not.
func TestRuleChangeLog(t *testing.T) {
	s := newTestServer(t, nil)
	var log syncBuffer
	s.log = slog.New(slog.NewJSONHandler(&log, nil))
	a := s.connectV2(t, alice)
	svc := a.attach()
	ids := a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("a", 3, 8)}).(*protocol.AddRulesReply).RuleIDs
	a.ok(&protocol.ReplaceRules{ServiceID: svc, Updates: []protocol.RuleEntry{{RuleID: ids[0], Rule: testRule("b", 8)}}})
	txn := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	a.ok(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: testRules("c", 2, 8)})
	a.ok(&protocol.DeleteRules{ServiceID: svc, Txn: txn, RuleIDs: ids[1:]})
	staged := len(changes(t, log.String()))
	a.ok(&protocol.Commit{Txn: txn})
	// Refused: another uid's service; an empty batch changes nothing.
	s.connectV2(t, bob).refused(&protocol.DeleteRules{ServiceID: svc, RuleIDs: ids[:1]}, syscall.EPERM, "belongs to uid 1000")
	a.ok(&protocol.DeleteRules{ServiceID: svc, RuleIDs: []uint32{}})
	// An admin changes alice's rules: the line names both.
	s.connect(t, admin, true).ok(&protocol.DeleteRules{ServiceID: svc, RuleIDs: ids[:1]})

	line := func(client string, pid, uid float64, added, replaced, deleted, txn, rules float64) map[string]any {
		return map[string]any{"client": client, "pid": pid, "uid": uid, "service": float64(svc), "protocol": "udp", "owner_uid": 1000.0,
			"added": added, "replaced": replaced, "deleted": deleted, "txn": txn, "rules": rules}
	}
	want := []map[string]any{
		line("agent", 11, 1000, 3, 0, 0, 0, 3),
		line("agent", 11, 1000, 0, 1, 0, 0, 3),
		line("agent", 11, 1000, 2, 0, 2, float64(txn), 3),
		line("test", 13, 1002, 0, 0, 1, 0, 2),
	}
	got := changes(t, log.String())
	if staged != 2 || !reflect.DeepEqual(got, want) {
		t.Errorf("%d lines before COMMIT, want 2; audit lines\n%v\nwant\n%v\nlog:\n%s", staged, got, want, log.String())
	}
}
