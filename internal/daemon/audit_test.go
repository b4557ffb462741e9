package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

// records is a slog.Handler that keeps the records logged, for the test
// to read as the server's goroutines log. Attributes added by With are
// dropped: the lines it checks have none.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec.Clone())
	return nil
}

// auditFields are the fields of a "rules changed" line the test compares.
var auditFields = []string{"client", "pid", "uid", "service", "protocol", "addr", "owner_uid", "added", "replaced", "deleted", "txn", "rules"}

// changes are the "rules changed" lines logged, each as its auditFields
// printed, in order.
func (r *records) changes(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.list {
		if rec.Message != "rules changed" {
			continue
		}
		if rec.Level != slog.LevelInfo {
			t.Errorf("audit line at level %v", rec.Level)
		}
		fields := map[string]string{}
		rec.Attrs(func(a slog.Attr) bool {
			fields[a.Key] = a.Value.String()
			return true
		})
		var line []string
		for _, f := range auditFields {
			line = append(line, f+"="+fields[f])
		}
		out = append(out, strings.Join(line, " "))
	}
	return out
}

// Every change of rules is logged in one line, a batch's or a
// transaction's at COMMIT, with who made it, on which service, and how
// many rules it added, replaced and deleted; refused and staged ones are
// not.
func TestRuleChangeLog(t *testing.T) {
	s := newTestServer(t, nil)
	log := &records{}
	s.log = slog.New(log)
	a := s.connectV2(t, alice)
	svc := a.attach()
	ids := a.ok(&protocol.AddRules{ServiceID: svc, Rules: testRules("a", 3, 8)}).(*protocol.AddRulesReply).RuleIDs
	a.ok(&protocol.ReplaceRules{ServiceID: svc, Updates: []protocol.RuleEntry{{RuleID: ids[0], Rule: testRule("b", 8)}}})
	txn := a.ok(&protocol.Begin{ServiceID: svc}).(*protocol.BeginReply).Txn
	a.ok(&protocol.AddRules{ServiceID: svc, Txn: txn, Rules: testRules("c", 2, 8)})
	a.ok(&protocol.DeleteRules{ServiceID: svc, Txn: txn, RuleIDs: ids[1:]})
	staged := len(log.changes(t))
	a.ok(&protocol.Commit{Txn: txn})
	// Refused: another uid's service; an empty batch changes nothing.
	s.connectV2(t, bob).refused(&protocol.DeleteRules{ServiceID: svc, RuleIDs: ids[:1]}, syscall.EPERM, "belongs to uid 1000")
	a.ok(&protocol.DeleteRules{ServiceID: svc, RuleIDs: []uint32{}})
	// An admin changes alice's rules: the line names both.
	s.connect(t, admin, true).ok(&protocol.DeleteRules{ServiceID: svc, RuleIDs: ids[:1]})

	addr := s.service(svc).Info.Local
	line := func(client string, pid, uid int, added, replaced, deleted int, txn uint32, rules int) string {
		return fmt.Sprintf("client=%s pid=%d uid=%d service=%d protocol=udp addr=%s owner_uid=1000 added=%d replaced=%d deleted=%d txn=%d rules=%d",
			client, pid, uid, svc, addr, added, replaced, deleted, txn, rules)
	}
	want := []string{
		line("agent", 11, 1000, 3, 0, 0, 0, 3),
		line("agent", 11, 1000, 0, 1, 0, 0, 3),
		line("agent", 11, 1000, 2, 0, 2, txn, 3),
		line("test", 13, 1002, 0, 0, 1, 0, 2),
	}
	if got := log.changes(t); staged != 2 || !reflect.DeepEqual(got, want) {
		t.Errorf("%d lines before COMMIT, want 2; audit lines\n%s\nwant\n%s", staged, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
