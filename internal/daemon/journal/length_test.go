package journal

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

func withLength(r rule.Rule, min, max uint16) rule.Rule {
	r.Condition.MinLen, r.Condition.MaxLen = min, max
	return r
}

// A rule's length condition survives a restart, from the records and from
// a snapshot, and RuleSize counts it.
func TestLengthConditionsSurvive(t *testing.T) {
	dir := t.TempDir()
	j, _ := reopen(t, dir)
	s := service(1, "127.0.0.1:53")
	rs := []rule.Rule{withLength(newRule("a", "1"), 9, 9), withLength(newRule("b", "2"), 5, 40), withLength(newRule("c", "3"), 6, 0), newRule("d", "4")}
	must(t, j.Attach(s), j.Apply(1, model.Batch{Add: rs, AddIDs: []model.RuleID{1, 2, 3, 4}}),
		j.Apply(1, model.Batch{Replace: []model.RuleUpdate{{ID: 4, Rule: withLength(newRule("d", "4"), 0, 30)}}}))
	j.Close()
	s.Rules = map[model.RuleID]rule.Rule{1: rs[0], 2: rs[1], 3: rs[2], 4: withLength(newRule("d", "4"), 0, 30)}
	want := map[model.ServiceID]*Service{1: s}

	j, rep := reopen(t, dir)
	if !reflect.DeepEqual(rep.Services, want) {
		t.Fatalf("replay gives\n%+v\nwant\n%+v", rep.Services[1], s)
	}
	must(t, j.Compact(func(yield func(*Service) bool) { yield(s) }))
	live := int64(headLen + ServiceSize)
	for _, r := range s.Rules {
		live += RuleSize(r)
	}
	if j.Size() != live {
		t.Errorf("snapshot is %d bytes; RuleSize and ServiceSize say %d", j.Size(), live)
	}
	j.Close()
	if _, rep := reopen(t, dir); !reflect.DeepEqual(rep.Services, want) {
		t.Fatalf("replay of the snapshot gives\n%+v\nwant\n%+v", rep.Services[1], s)
	}
}

// testdata/journal-v1 was written by santad before length conditions
// (journal version 1, commit 9f92222): service 3 attached, rules "Hello"
// (1) and "PING" (2) added, then 2 replaced by "Hello" and 1 deleted. It
// still loads, is rewritten as version 2 at once, and takes new records.
func TestVersion1JournalLoads(t *testing.T) {
	old, err := os.ReadFile("testdata/journal-v1")
	if err != nil {
		t.Fatal(err)
	}
	dir, path := writeJournal(t, old)
	j, rep := reopen(t, dir)
	s, ok := rep.Services[3]
	hello := rule.Rule{Condition: rule.Condition{Pattern: []byte("Hello")}, Processors: []rule.Processor{rule.Put(0, []byte("COMSYS"))}, ReplyLen: 6}
	if !ok || s.UID != 1000 || s.Info.Local.String() != "10.0.0.1:53" || len(s.Rules) != 1 || !reflect.DeepEqual(s.Rules[2], hello) {
		t.Fatalf("version 1 journal replays %+v", rep.Services)
	}
	now, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := le.Uint32(now[4:]); v != version {
		t.Fatalf("the journal is version %d after Open; want %d", v, version)
	}
	must(t, j.Apply(3, model.Batch{Add: []rule.Rule{withLength(newRule("new", "n"), 7, 7)}, AddIDs: []model.RuleID{7}}))
	j.Close()
	_, rep = reopen(t, dir)
	if got := rep.Services[3].Rules; len(got) != 2 || got[7].Condition.MinLen != 7 || !reflect.DeepEqual(got[2], hello) {
		t.Fatalf("after a version-2 record: %+v", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Errorf("the rewrite left %v", left)
	}
}

// A rule's flags byte holds bit 0 only: any other is damage.
func TestUnknownRuleFlags(t *testing.T) {
	e := &encoder{}
	e.rule(newRule("x", "y"))
	flagsAt := 2 + 2 + 1 + 2 + 1 // offset, pattern "x", reply length, processor count
	e.b[flagsAt] = 2
	d := decoder{v: version, b: e.b}
	d.rule()
	if d.err == nil || d.err.Error() != "rule flags 0x2" {
		t.Fatalf("a rule with flags 2 decodes with %v", d.err)
	}
}
