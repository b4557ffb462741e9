// Package journal keeps santad's services and rules in an append-only file,
// so that a restarted santad restores exactly what it had acknowledged.
//
// A record is written after the data plane took a change and before the
// client hears of it: an acknowledged change is always in the journal. The
// journal is rewritten as a snapshot (one attach and one batch record per
// service) when santad starts and whenever it has grown past twice the size
// of such a snapshot.
//
// Records are not synced one by one: the journal has to survive santad, not
// the host, whose reboot ends every socket and hence every service anyway.
// What write(2) returned is in the page cache whatever happens to santad.
//
// What a crash can leave. A record is appended by one write(2), and a
// snapshot is written beside the journal, synced and renamed over it, so
// the header is never torn. santad dying inside a write (SIGKILL, the OOM
// killer) leaves a prefix of that record in the page cache: the file ends
// inside its frame or payload. Never a changed byte, a hole or zeros, and
// never a whole record with a bad CRC. That record was not acknowledged, so
// Open cuts it off and says so (Replayed.Torn). A record whose frame claims
// more bytes than the file holds is torn only if the bytes left end inside
// its fields: a damaged length in the middle of the journal claims bytes
// that hold a whole record and then the next ones, and is damage.
//
// A host crash, with state_dir on a disk filesystem (on the default tmpfs,
// /run, the journal is gone with the host), can also leave the file's new
// length without its data, which reads as zeros. Zeros from the end of a
// record to the end of the file are cut off like a torn record: no record
// has a length of zero. Zeros that start inside a record, after a page
// written only in part, look just like a damaged record whose payload ends
// in zeros, and are damage. After a reboot nothing in a journal can be
// restored (every socket it names ended), so moving it aside loses nothing.
//
// Anything else is damage no crash leaves: a whole record whose CRC-32C
// does not match or that does not decode, a length of zero or over maxLen,
// bytes after the last record that are not the start of one, a bad header.
// Open refuses such a journal with a *CorruptError and leaves it as it is:
// restoring the records before the damage would drop the acknowledged ones
// after it without a word, and compacting would destroy the evidence.
package journal

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// FileName is the journal's name in the state directory.
const FileName = "journal"

const (
	magic = 0x4a544e53 // the bytes "SNTJ"
	// version is the journal this santad writes: 2, whose rules carry a
	// flags byte and their length condition. It reads version 1 too (what
	// santad wrote before length conditions), and rewrites it at Open.
	version  = 2
	version1 = 1
	headLen  = 8       // magic, version
	frameLen = 8       // payload length, CRC-32C of the payload
	maxLen   = 1 << 30 // a payload longer than this is corruption
)

// snapshotBatch is the most rule bytes a snapshot puts in one record: a
// service's rules take as many records as they need, since one of them
// all could be over maxLen (an admin's million rules of a kilobyte), and
// the next start would refuse the journal as damaged. A variable for the
// tests.
var snapshotBatch int64 = 64 << 20

// Fits says whether b can be saved: a change whose batch record would be
// over maxLen (a transaction's commit, which the quota does not bound for
// an admin) could be written, but the next start would refuse the journal
// as damaged. It must be asked before the change is made.
func Fits(b model.Batch) error {
	if n := batchLen(b); n > maxLen {
		return fmt.Errorf("the change takes %d bytes in the journal; one change takes at most %d (%d MiB): make it in smaller ones", n, int64(maxLen), maxLen>>20)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Service is a service as the journal keeps it.
type Service struct {
	ID    model.ServiceID
	Info  model.SocketInfo
	UID   uint32 // owner
	GID   uint32
	Rules map[model.RuleID]rule.Rule
}

// Journal is the open journal file. It is not safe for concurrent use.
type Journal struct {
	path string
	f    *os.File
	size int64
}

// Replayed is what Open found in an existing journal.
type Replayed struct {
	Services map[model.ServiceID]*Service
	Existed  bool   // there was a journal: santad ran before
	Torn     string // what Open cut off the end, if anything: what a crash leaves
	TornAt   int64  // where that started
	Ignored  int64  // and its length in bytes
}

// Open replays the journal in dir, creating it if there is none, cuts off
// a torn end and opens the file for appending. A damaged journal is a
// *CorruptError, and left as it is.
func Open(dir string) (*Journal, Replayed, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		j := &Journal{path: path}
		return j, Replayed{Services: map[model.ServiceID]*Service{}}, j.Compact(nil)
	case err != nil:
		return nil, Replayed{}, fmt.Errorf("opening journal: %w", err)
	}
	j, rep, err := open(f)
	if err != nil {
		f.Close()
		return nil, Replayed{}, err
	}
	return j, rep, nil
}

// open replays f and cuts off its torn end, if any.
func open(f *os.File) (*Journal, Replayed, error) {
	rep := Replayed{Services: map[model.ServiceID]*Service{}, Existed: true}
	r, err := replay(f, rep.Services)
	if err != nil {
		return nil, rep, err
	}
	// Appending after a torn end would hide every later record from
	// replay: cut it off first.
	if r.torn != "" {
		rep.Torn, rep.TornAt, rep.Ignored = r.torn, r.good, r.size-r.good
		if err := f.Truncate(r.good); err != nil {
			return nil, rep, fmt.Errorf("cutting off the journal's torn end: %w", err)
		}
	}
	if _, err := f.Seek(r.good, io.SeekStart); err != nil {
		return nil, rep, fmt.Errorf("reading journal: %w", err)
	}
	j := &Journal{path: f.Name(), f: f, size: r.good}
	// Records of this version cannot go after an older one's: the journal
	// is rewritten in this version first, whole, as Compact does.
	if r.version != version {
		if err := j.Compact(maps.Values(rep.Services)); err != nil {
			return nil, rep, fmt.Errorf("rewriting journal version %d as version %d: %w", r.version, version, err)
		}
	}
	return j, rep, nil
}

// Size is the journal's length in bytes.
func (j *Journal) Size() int64 { return j.size }

// Attach records a new service (its Rules are not written).
func (j *Journal) Attach(s *Service) error {
	e := newRecord()
	e.attach(s)
	return j.append(e)
}

// Remove records that a service ended.
func (j *Journal) Remove(id model.ServiceID) error {
	e := newRecord()
	e.remove(id)
	return j.append(e)
}

// Apply records a batch the data plane took; b.AddIDs are the ids it gave.
// Fits said it can be.
func (j *Journal) Apply(id model.ServiceID, b model.Batch) error {
	if err := Fits(b); err != nil {
		return err
	}
	// Sized up front: a million-rule batch is a record of some 100 MB.
	e := &encoder{b: make([]byte, frameLen, frameLen+batchLen(b))}
	e.batch(id, b)
	return j.append(e)
}

// append writes one record in one write. A write that fails may have
// written part of the record: it is cut off, or the records appended after
// it would sit behind it and the next Open would find the journal damaged.
// If it cannot be, appends stop until Compact writes a new journal.
func (j *Journal) append(e *encoder) error {
	if j.f == nil {
		return errors.New("journal is closed")
	}
	if _, err := j.f.Write(e.frame()); err != nil {
		err = fmt.Errorf("appending to journal: %w", err)
		if cut := j.cutBack(); cut != nil {
			j.f.Close()
			j.f = nil
			err = errors.Join(err, cut)
		}
		return err
	}
	j.size += int64(len(e.b))
	return nil
}

// cutBack cuts the file back to the records written whole.
func (j *Journal) cutBack() error {
	err := j.f.Truncate(j.size)
	if err == nil {
		_, err = j.f.Seek(j.size, io.SeekStart)
	}
	if err != nil {
		return fmt.Errorf("cutting off a record written in part: %w", err)
	}
	return nil
}

// newRecord starts a record, leaving room for its frame.
func newRecord() *encoder { return &encoder{b: make([]byte, frameLen, 256)} }

// frame fills in the frame of the record and returns it whole.
func (e *encoder) frame() []byte {
	payload := e.b[frameLen:]
	le.PutUint32(e.b, uint32(len(payload)))
	le.PutUint32(e.b[4:], crc32.Checksum(payload, castagnoli))
	return e.b
}

// Compact replaces the journal by a snapshot of services: written beside
// it, synced, then renamed over it, so a crash leaves one or the other.
func (j *Journal) Compact(services iter.Seq[*Service]) error {
	tmp, err := os.CreateTemp(filepath.Dir(j.path), FileName+".*.tmp")
	if err != nil {
		return fmt.Errorf("compacting journal: %w", err)
	}
	size, err := writeSnapshot(tmp, services)
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), j.path)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("compacting journal: %w", err)
	}
	syncDir(filepath.Dir(j.path))
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.size = tmp, size
	return nil
}

func writeSnapshot(f *os.File, services iter.Seq[*Service]) (int64, error) {
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(le.AppendUint32(le.AppendUint32(nil, magic), version))
	size := int64(headLen)
	put := func(e *encoder) {
		n, _ := w.Write(e.frame()) // a write error sticks: Flush returns it
		size += int64(n)
	}
	if services != nil {
		for s := range services {
			e := newRecord()
			e.attach(s)
			put(e)
			for b := range snapshotBatches(s.Batch()) {
				e = newRecord()
				e.batch(s.ID, b)
				put(e)
			}
		}
	}
	return size, w.Flush()
}

// snapshotBatches cuts a service's batch of adds into batches of at most
// snapshotBatch rule bytes each (at least one rule), none if it is empty.
func snapshotBatches(b model.Batch) iter.Seq[model.Batch] {
	return func(yield func(model.Batch) bool) {
		for len(b.Add) > 0 {
			n, size := 1, RuleSize(b.Add[0])
			for n < len(b.Add) && size+RuleSize(b.Add[n]) <= snapshotBatch {
				size += RuleSize(b.Add[n])
				n++
			}
			if !yield(model.Batch{Add: b.Add[:n], AddIDs: b.AddIDs[:n]}) {
				return
			}
			b.Add, b.AddIDs = b.Add[n:], b.AddIDs[n:]
		}
	}
}

// Batch adds the service's rules under their ids, in rising id order: the
// batch that restores them, and always the same bytes in a snapshot.
func (s *Service) Batch() model.Batch {
	b := model.Batch{AddIDs: make([]model.RuleID, 0, len(s.Rules))}
	for id := range s.Rules {
		b.AddIDs = append(b.AddIDs, id)
	}
	slices.Sort(b.AddIDs)
	b.Add = make([]rule.Rule, len(b.AddIDs))
	for i, id := range b.AddIDs {
		b.Add[i] = s.Rules[id]
	}
	return b
}

// syncDir makes a rename durable. Best effort: the rename itself is atomic.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Close closes the file.
func (j *Journal) Close() error {
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}
