// Package journal keeps santad's services and rules in an append-only file,
// so that a restarted santad restores exactly what it had acknowledged.
//
// A record is written after the data plane took a change and before the
// client hears of it: an acknowledged change is always in the journal. A
// record torn by a crash is the last one, and replay ignores it. The
// journal is rewritten as a snapshot (one attach and one batch record per
// service) when santad starts and whenever it has grown past twice the size
// of such a snapshot.
//
// Records are not synced one by one: the journal has to survive santad, not
// the host, whose reboot ends every socket and hence every service anyway.
// What write(2) returned is in the page cache whatever happens to santad.
package journal

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"

	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/rules"
)

// FileName is the journal's name in the state directory.
const FileName = "journal"

const (
	magic    = 0x4a544e53 // the bytes "SNTJ"
	version  = 1
	headLen  = 8       // magic, version
	frameLen = 8       // payload length, CRC-32C of the payload
	maxLen   = 1 << 30 // a payload longer than this is corruption
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Service is a service as the journal keeps it.
type Service struct {
	ID    datapath.ServiceID
	Info  datapath.SocketInfo
	UID   uint32 // owner
	GID   uint32
	Rules map[datapath.RuleID]rules.Rule
}

// Journal is the open journal file. It is not safe for concurrent use.
type Journal struct {
	path string
	f    *os.File
	size int64
}

// Replayed is what Open found in an existing journal.
type Replayed struct {
	Services map[datapath.ServiceID]*Service
	Existed  bool  // there was a journal: santad ran before
	Ignored  int64 // bytes after the last good record (a torn write)
}

// Open replays the journal in dir, creating it if there is none, cuts off
// a torn last record and opens the file for appending.
func Open(dir string) (*Journal, Replayed, error) {
	path := filepath.Join(dir, FileName)
	rep := Replayed{Services: map[datapath.ServiceID]*Service{}}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		j := &Journal{path: path}
		return j, rep, j.Compact(nil)
	case err != nil:
		return nil, rep, fmt.Errorf("opening journal: %w", err)
	}
	rep.Existed = true
	good, err := replay(f, rep.Services)
	if err != nil {
		f.Close()
		return nil, rep, err
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, rep, fmt.Errorf("reading journal: %w", err)
	}
	if good == 0 {
		// Not even a header: start over with an empty journal.
		f.Close()
		rep.Ignored = end
		j := &Journal{path: path}
		return j, rep, j.Compact(nil)
	}
	// Appending after a torn record would hide every later record from
	// replay: cut it off first.
	if rep.Ignored = end - good; rep.Ignored > 0 {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, rep, fmt.Errorf("truncating torn journal record: %w", err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, rep, fmt.Errorf("reading journal: %w", err)
	}
	return &Journal{path: path, f: f, size: good}, rep, nil
}

// replay applies every good record to services and returns the offset
// after the last one.
func replay(f *os.File, services map[datapath.ServiceID]*Service) (int64, error) {
	r := bufio.NewReaderSize(f, 1<<20)
	var head [headLen]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil // torn while being created: empty
	}
	if le.Uint32(head[:]) != magic || le.Uint32(head[4:]) != version {
		return 0, fmt.Errorf("%s is not a version %d santad journal", f.Name(), version)
	}
	good := int64(headLen)
	var frame [frameLen]byte
	for {
		if _, err := io.ReadFull(r, frame[:]); err != nil {
			return good, nil
		}
		n := le.Uint32(frame[:])
		if n == 0 || n > maxLen {
			return good, nil
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return good, nil
		}
		if crc32.Checksum(payload, castagnoli) != le.Uint32(frame[4:]) {
			return good, nil
		}
		if err := apply(services, payload); err != nil {
			return good, nil
		}
		good += frameLen + int64(n)
	}
}

// apply makes one record's change to services. A record that names a
// service or rule that is not there changes what it can: replay must
// restore as much as the journal holds.
func apply(services map[datapath.ServiceID]*Service, payload []byte) error {
	d := decoder{b: payload[1:]}
	switch payload[0] {
	case kindAttach:
		s := d.attach()
		if d.err == nil {
			services[s.ID] = s
		}
	case kindRemove:
		id := datapath.ServiceID(d.u32())
		if d.err == nil {
			delete(services, id)
		}
	case kindBatch:
		id, b := d.batch()
		if s := services[id]; s != nil && d.err == nil {
			for _, del := range b.Delete {
				delete(s.Rules, del)
			}
			for _, u := range b.Replace {
				s.Rules[u.ID] = u.Rule
			}
			for i, r := range b.Add {
				s.Rules[b.AddIDs[i]] = r
			}
		}
	default:
		return fmt.Errorf("record kind %d", payload[0])
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes left over", len(d.b))
	}
	return d.err
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
func (j *Journal) Remove(id datapath.ServiceID) error {
	e := newRecord()
	e.remove(id)
	return j.append(e)
}

// Apply records a batch the data plane took; b.AddIDs are the ids it gave.
func (j *Journal) Apply(id datapath.ServiceID, b datapath.Batch) error {
	// Sized up front: a million-rule batch is a record of some 100 MB.
	e := &encoder{b: make([]byte, frameLen, frameLen+batchLen(b))}
	e.batch(id, b)
	return j.append(e)
}

// append writes one record in one write.
func (j *Journal) append(e *encoder) error {
	if j.f == nil {
		return errors.New("journal is closed")
	}
	n, err := j.f.Write(e.frame())
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("appending to journal: %w", err)
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
			if len(s.Rules) > 0 {
				e = newRecord()
				e.batch(s.ID, s.Batch())
				put(e)
			}
		}
	}
	return size, w.Flush()
}

// Batch adds the service's rules under their ids, in rising id order: the
// batch that restores them, and always the same bytes in a snapshot.
func (s *Service) Batch() datapath.Batch {
	b := datapath.Batch{AddIDs: make([]datapath.RuleID, 0, len(s.Rules))}
	for id := range s.Rules {
		b.AddIDs = append(b.AddIDs, id)
	}
	slices.Sort(b.AddIDs)
	b.Add = make([]rules.Rule, len(b.AddIDs))
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
