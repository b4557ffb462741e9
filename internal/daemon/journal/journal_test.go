package journal

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/rules"
)

func rule(pattern string, reply string) rules.Rule {
	return rules.Rule{
		Condition:  rules.Condition{Offset: 2, Pattern: []byte(pattern)},
		Processors: []rules.Processor{rules.Put(2, []byte(reply)), rules.Copy(0, 2, 0)},
		ReplyLen:   uint16(2 + len(reply)),
	}
}

func service(id datapath.ServiceID, addr string) *Service {
	return &Service{ID: id, UID: 1000 + uint32(id), GID: 100,
		Info:  datapath.SocketInfo{Cookie: 7 + uint64(id), NetnsCookie: 1, Protocol: 17, Local: netip.MustParseAddrPort(addr)},
		Rules: map[datapath.RuleID]rules.Rule{}}
}

// history writes a journal of two services, batches on both, one removed
// later, and returns what replay must give.
func history(t *testing.T, j *Journal) map[datapath.ServiceID]*Service {
	t.Helper()
	a, b, c := service(1, "127.0.0.1:53"), service(2, "[::1]:5353"), service(3, "[::ffff:10.0.0.1]:7")
	must(t, j.Attach(a), j.Attach(b), j.Attach(c))
	must(t, j.Apply(1, datapath.Batch{Add: []rules.Rule{rule("one", "1"), rule("two", "2")}, AddIDs: []datapath.RuleID{0, 1}}))
	must(t, j.Apply(2, datapath.Batch{Add: []rules.Rule{rule("three", "3")}, AddIDs: []datapath.RuleID{2}}))
	must(t, j.Apply(1, datapath.Batch{
		Add:     []rules.Rule{rule("four", "4")},
		AddIDs:  []datapath.RuleID{5},
		Replace: []datapath.RuleUpdate{{ID: 1, Rule: rule("two", "II")}},
		Delete:  []datapath.RuleID{0},
	}))
	must(t, j.Remove(3))
	a.Rules = map[datapath.RuleID]rules.Rule{1: rule("two", "II"), 5: rule("four", "4")}
	b.Rules = map[datapath.RuleID]rules.Rule{2: rule("three", "3")}
	return map[datapath.ServiceID]*Service{1: a, 2: b}
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
	want := history(t, j)
	j.Close()

	_, rep = reopen(t, dir)
	if !rep.Existed || rep.Ignored != 0 {
		t.Errorf("replay: existed %v, ignored %d; want true, 0", rep.Existed, rep.Ignored)
	}
	if !reflect.DeepEqual(rep.Services, want) {
		t.Errorf("replay gives\n%+v\nwant\n%+v", rep.Services, want)
	}
}

// A record cut short by a crash is ignored and cut off, so that records
// appended later replay.
func TestTornRecord(t *testing.T) {
	dir := t.TempDir()
	j, _ := reopen(t, dir)
	want := history(t, j)
	good := j.Size()
	must(t, j.Apply(2, datapath.Batch{Add: []rules.Rule{rule("lost", "x")}, AddIDs: []datapath.RuleID{9}}))
	j.Close()
	path := filepath.Join(dir, FileName)
	for _, cut := range []int64{1, 5, 9} { // inside the frame, inside the payload
		if err := os.Truncate(path, good+cut); err != nil {
			t.Fatal(err)
		}
		j, rep := reopen(t, dir)
		if rep.Ignored != cut || !reflect.DeepEqual(rep.Services, want) {
			t.Fatalf("cut %d bytes into the last record: ignored %d, services %+v", cut, rep.Ignored, rep.Services)
		}
		must(t, j.Remove(1))
		j.Close()
		_, rep = reopen(t, dir)
		if _, ok := rep.Services[1]; ok || len(rep.Services) != 1 {
			t.Fatalf("a record appended after a torn one does not replay: %+v", rep.Services)
		}
		// Back to the state before the loop, for the next cut.
		j, _ = reopen(t, dir)
		must(t, j.Compact(func(yield func(*Service) bool) {
			for _, s := range want {
				if !yield(s) {
					return
				}
			}
		}))
		good = j.Size()
		must(t, j.Apply(2, datapath.Batch{Add: []rules.Rule{rule("lost", "x")}, AddIDs: []datapath.RuleID{9}}))
		j.Close()
	}
}

// A record whose checksum does not match ends the replay.
func TestCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	j, _ := reopen(t, dir)
	must(t, j.Attach(service(1, "127.0.0.1:53")))
	size := j.Size()
	must(t, j.Attach(service(2, "127.0.0.1:54")))
	j.Close()
	path := filepath.Join(dir, FileName)
	data, _ := os.ReadFile(path)
	data[len(data)-1] ^= 0xff
	must(t, os.WriteFile(path, data, 0o600))
	_, rep := reopen(t, dir)
	if len(rep.Services) != 1 || rep.Ignored != int64(len(data))-size {
		t.Errorf("replay of a corrupt last record: services %v, ignored %d", rep.Services, rep.Ignored)
	}
}

func TestCompact(t *testing.T) {
	dir := t.TempDir()
	j, _ := reopen(t, dir)
	want := history(t, j)
	before := j.Size()
	must(t, j.Compact(func(yield func(*Service) bool) {
		for _, id := range []datapath.ServiceID{1, 2} {
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

func TestNotAJournal(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, FileName), []byte("something else entirely"), 0o600))
	if _, _, err := Open(dir); err == nil {
		t.Fatal("Open accepts a file that is not a journal")
	}
}

// A batch record's buffer is sized before it is written: the size must be
// exact, or a million-rule batch grows its buffer again and again.
func TestBatchLen(t *testing.T) {
	b := datapath.Batch{
		Add:     []rules.Rule{rule("four", "4"), rule("five", "55555")},
		AddIDs:  []datapath.RuleID{5, 6},
		Replace: []datapath.RuleUpdate{{ID: 1, Rule: rule("two", "II")}},
		Delete:  []datapath.RuleID{0, 3},
	}
	e := &encoder{}
	e.batch(1, b)
	if got, want := batchLen(b), int64(len(e.b)); got != want {
		t.Fatalf("batchLen = %d, the record's payload is %d bytes", got, want)
	}
}
