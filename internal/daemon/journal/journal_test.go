package journal

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

func newRule(pattern string, reply string) rule.Rule {
	return rule.Rule{
		Condition:  rule.Condition{Offset: 2, Pattern: []byte(pattern)},
		Processors: []rule.Processor{rule.Put(2, []byte(reply)), rule.Copy(0, 2, 0)},
		ReplyLen:   uint16(2 + len(reply)),
	}
}

func service(id model.ServiceID, addr string) *Service {
	return &Service{ID: id, UID: 1000 + uint32(id), GID: 100,
		Info:  model.SocketInfo{Cookie: 7 + uint64(id), NetnsCookie: 1, Protocol: 17, Local: netip.MustParseAddrPort(addr)},
		Rules: map[model.RuleID]rule.Rule{}}
}

// history writes a journal of three services, batches on two, one removed
// in between, and returns what replay must give and where each of its
// seven records starts. The last record is a batch: its payload ends in
// zeros (deleted rule 0), as many do.
func history(t *testing.T, j *Journal) (map[model.ServiceID]*Service, []int64) {
	t.Helper()
	a, b, c := service(1, "127.0.0.1:53"), service(2, "[::1]:5353"), service(3, "[::ffff:10.0.0.1]:7")
	var starts []int64
	for _, write := range []func() error{
		func() error { return j.Attach(a) },
		func() error { return j.Attach(b) },
		func() error { return j.Attach(c) },
		func() error {
			return j.Apply(1, model.Batch{Add: []rule.Rule{newRule("one", "1"), newRule("two", "2")}, AddIDs: []model.RuleID{0, 1}})
		},
		func() error { return j.Remove(3) },
		func() error {
			return j.Apply(2, model.Batch{Add: []rule.Rule{newRule("three", "3")}, AddIDs: []model.RuleID{2}})
		},
		func() error {
			return j.Apply(1, model.Batch{
				Add:     []rule.Rule{newRule("four", "4")},
				AddIDs:  []model.RuleID{5},
				Replace: []model.RuleUpdate{{ID: 1, Rule: newRule("two", "II")}},
				Delete:  []model.RuleID{0},
			})
		},
	} {
		starts = append(starts, j.Size())
		must(t, write())
	}
	a.Rules = map[model.RuleID]rule.Rule{1: newRule("two", "II"), 5: newRule("four", "4")}
	b.Rules = map[model.RuleID]rule.Rule{2: newRule("three", "3")}
	return map[model.ServiceID]*Service{1: a, 2: b}, starts
}

// beforeLast is what the first six records of history give.
func beforeLast() map[model.ServiceID]*Service {
	a, b := service(1, "127.0.0.1:53"), service(2, "[::1]:5353")
	a.Rules = map[model.RuleID]rule.Rule{0: newRule("one", "1"), 1: newRule("two", "2")}
	b.Rules = map[model.RuleID]rule.Rule{2: newRule("three", "3")}
	return map[model.ServiceID]*Service{1: a, 2: b}
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func reopen(t *testing.T, dir string) (*Journal, Replayed) {
	t.Helper()
	j, rep, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, rep
}

func TestReplay(t *testing.T) {
	dir := t.TempDir()
	j, rep := reopen(t, dir)
	if rep.Existed || len(rep.Services) != 0 {
		t.Fatalf("a new journal replays %+v", rep)
	}
	want, _ := history(t, j)
	j.Close()

	_, rep = reopen(t, dir)
	if !rep.Existed || rep.Ignored != 0 {
		t.Errorf("replay: existed %v, ignored %d; want true, 0", rep.Existed, rep.Ignored)
	}
	if !reflect.DeepEqual(rep.Services, want) {
		t.Errorf("replay gives\n%+v\nwant\n%+v", rep.Services, want)
	}
}

func TestCompact(t *testing.T) {
	dir := t.TempDir()
	j, _ := reopen(t, dir)
	want, _ := history(t, j)
	before := j.Size()
	must(t, j.Compact(func(yield func(*Service) bool) {
		for _, id := range []model.ServiceID{1, 2} {
			if !yield(want[id]) {
				return
			}
		}
	}))
	var live int64 = headLen
	for _, s := range want {
		live += ServiceSize
		for _, r := range s.Rules {
			live += RuleSize(r)
		}
	}
	if j.Size() != live || j.Size() >= before {
		t.Errorf("snapshot is %d bytes (journal was %d); RuleSize and ServiceSize say %d", j.Size(), before, live)
	}
	must(t, j.Remove(2))
	j.Close()
	_, rep := reopen(t, dir)
	delete(want, 2)
	if !reflect.DeepEqual(rep.Services, want) {
		t.Errorf("replay after compaction gives %+v, want %+v", rep.Services, want)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Errorf("compaction left %v", left)
	}
}

// A batch record's buffer is sized before it is written: the size must be
// exact, or a million-rule batch grows its buffer again and again.
func TestBatchLen(t *testing.T) {
	b := model.Batch{
		Add:     []rule.Rule{newRule("four", "4"), newRule("five", "55555")},
		AddIDs:  []model.RuleID{5, 6},
		Replace: []model.RuleUpdate{{ID: 1, Rule: newRule("two", "II")}},
		Delete:  []model.RuleID{0, 3},
	}
	e := &encoder{}
	e.batch(1, b)
	if got, want := batchLen(b), int64(len(e.b)); got != want {
		t.Fatalf("batchLen = %d, the record's payload is %d bytes", got, want)
	}
}

// An append that fails part-way (a full disk, here the file size limit)
// leaves nothing of its record: records appended later would follow it,
// and the next start would find the journal damaged.
func TestFailedAppend(t *testing.T) {
	dir := t.TempDir()
	j, _ := reopen(t, dir)
	want, _ := history(t, j)
	size := j.Size()
	var limit syscall.Rlimit
	must(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &limit))
	must(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(size) + 10, Max: limit.Max}))
	err := j.Apply(2, model.Batch{Add: []rule.Rule{newRule("lost", "x")}, AddIDs: []model.RuleID{9}})
	must(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit))
	if err == nil {
		t.Fatal("an append past the file size limit succeeded")
	}
	if j.Size() != size {
		t.Errorf("after a failed append the journal counts %d bytes, had %d", j.Size(), size)
	}
	must(t, j.Remove(2))
	j.Close()
	_, rep := reopen(t, dir)
	delete(want, 2)
	if !reflect.DeepEqual(rep.Services, want) || rep.Ignored != 0 {
		t.Errorf("after a failed append and a good one, replay gives %+v, ignoring %d bytes", rep.Services, rep.Ignored)
	}
}

// A snapshot puts a service's rules in records of at most snapshotBatch
// rule bytes: one record of them all could pass maxLen, and the next
// start would refuse the journal as damaged. They replay whole.
func TestCompactSplitsLargeServices(t *testing.T) {
	defer func(was int64) { snapshotBatch = was }(snapshotBatch)
	one := RuleSize(newRule("rule-000", "reply-000"))
	snapshotBatch = 3 * one // three rules a record
	dir := t.TempDir()
	j, _ := reopen(t, dir)
	s := service(1, "127.0.0.1:53")
	for i := range 10 {
		s.Rules[model.RuleID(i)] = newRule(fmt.Sprintf("rule-%03d", i), fmt.Sprintf("reply-%03d", i))
	}
	must(t, j.Compact(func(yield func(*Service) bool) { yield(s) }))
	// 4 batch records (3 + 3 + 3 + 1 rules): ServiceSize counts the
	// frame and header of one.
	want := headLen + ServiceSize + 10*one + 3*(frameLen+1+4+3*4)
	if j.Size() != want {
		t.Errorf("snapshot is %d bytes; want %d, the rules in 4 records", j.Size(), want)
	}
	j.Close()
	_, rep := reopen(t, dir)
	if want := map[model.ServiceID]*Service{1: s}; !reflect.DeepEqual(rep.Services, want) {
		t.Errorf("replay gives %+v, want %+v", rep.Services, want)
	}
}

// A change whose record would pass maxLen is refused before it is made
// (Fits) and never written (Apply): the next start would refuse the
// journal.
func TestFits(t *testing.T) {
	big := newRule("p", string(make([]byte, 60000))) // the same bytes in every rule: nothing of 1 GiB is allocated
	b := model.Batch{}
	for int64(len(b.Add))*RuleSize(big) <= maxLen {
		b.Add, b.AddIDs = append(b.Add, big), append(b.AddIDs, model.RuleID(len(b.Add)))
	}
	if err := Fits(b); err == nil {
		t.Fatalf("a batch of %d bytes fits", batchLen(b))
	}
	j, _ := reopen(t, t.TempDir())
	before := j.Size()
	if err := j.Apply(1, b); err == nil || j.Size() != before {
		t.Fatalf("Apply of a batch over maxLen: %v, journal %d bytes, was %d", err, j.Size(), before)
	}
	b.Add, b.AddIDs = b.Add[:len(b.Add)-2], b.AddIDs[:len(b.AddIDs)-2]
	if err := Fits(b); err != nil {
		t.Fatalf("a batch of %d bytes (under %d): %v", batchLen(b), maxLen, err)
	}
}
