package journal

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/santa-offload/santa/internal/model"
)

// replayed is where replay stopped and why.
type replayed struct {
	size    int64  // the file's length
	good    int64  // the offset after the last good record
	records int    // good records
	version uint32 // the file's, which its rules are encoded in
	torn    string // what follows them, if anything: a torn end (damage.go)
}

// replay applies every good record of f to services. Past the last one it
// finds the end of the file, a torn end, or damage: a *CorruptError.
func replay(f *os.File, services map[model.ServiceID]*Service) (replayed, error) {
	var rep replayed
	st, err := f.Stat()
	if err != nil {
		return rep, fmt.Errorf("reading journal: %w", err)
	}
	rep.size = st.Size()
	corrupt := func(at int64, format string, args ...any) error {
		return &CorruptError{Path: f.Name(), Offset: at, Size: rep.size, Records: rep.records, Reason: fmt.Sprintf(format, args...)}
	}
	// A journal is only ever created whole, by Compact's rename: even its
	// header cannot be torn.
	if rep.size < headLen {
		return rep, corrupt(0, "the file ends inside the header, after %d of its %d bytes", rep.size, headLen)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	read := func(n int64) ([]byte, error) {
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			return nil, fmt.Errorf("reading journal: %w", err)
		}
		return p, nil
	}
	head, err := read(headLen)
	if err != nil {
		return rep, err
	}
	if m := le.Uint32(head); m != magic {
		return rep, corrupt(0, "not a santad journal: it starts %q, not %q", head[:4], le.AppendUint32(nil, magic))
	}
	if v := le.Uint32(head[4:]); v != version && v != version1 {
		return rep, corrupt(0, "version %d of the journal; this santad reads versions %d and %d", v, version1, version)
	} else {
		rep.version = v
	}
	rep.good = headLen
	for rep.good < rep.size {
		left := rep.size - rep.good
		frame, err := r.Peek(int(min(left, frameLen)))
		if err != nil {
			return rep, fmt.Errorf("reading journal: %w", err)
		}
		if zeros(frame) {
			if all, err := zerosToEnd(r); err != nil || all {
				rep.torn = tornZeros
				return rep, err
			}
			return rep, corrupt(rep.good, "a frame of zeros, and bytes other than zeros after it")
		}
		if len(frame) < frameLen {
			rep.torn = tornRecord
			return rep, nil
		}
		n, sum := int64(le.Uint32(frame)), le.Uint32(frame[4:])
		r.Discard(frameLen) // peeked: cannot fail
		switch {
		case n == 0 || n > maxLen:
			return rep, corrupt(rep.good, "a record length of %d (1 to %d)", n, maxLen)
		case frameLen+n > left:
			start, err := read(left - frameLen)
			if err != nil {
				return rep, err
			}
			if !cutShort(start, rep.version) {
				return rep, corrupt(rep.good, "its frame says %d bytes, more than the %d left in the file, and they are not the start of one record",
					n, len(start))
			}
			rep.torn = tornRecord
			return rep, nil
		}
		payload, err := read(n)
		if err != nil {
			return rep, err
		}
		if crc32.Checksum(payload, castagnoli) != sum {
			return rep, corrupt(rep.good, "its CRC-32C does not match")
		}
		change, err := decode(payload, rep.version)
		if err != nil {
			return rep, corrupt(rep.good, "its CRC-32C matches but it does not decode: %v", err)
		}
		change(services)
		rep.good += frameLen + n
		rep.records++
	}
	return rep, nil
}

// decode reads a record's payload and returns the change it makes. A
// record that names a service or rule that is not there changes what it
// can: replay must restore as much as the journal holds.
func decode(payload []byte, v uint32) (func(map[model.ServiceID]*Service), error) {
	if len(payload) == 0 {
		return nil, errShort
	}
	d := decoder{v: v, b: payload[1:]}
	var change func(map[model.ServiceID]*Service)
	switch payload[0] {
	case kindAttach:
		s := d.attach()
		change = func(services map[model.ServiceID]*Service) { services[s.ID] = s }
	case kindRemove:
		id := model.ServiceID(d.u32())
		change = func(services map[model.ServiceID]*Service) { delete(services, id) }
	case kindBatch:
		id, b := d.batch()
		change = func(services map[model.ServiceID]*Service) {
			s := services[id]
			if s == nil {
				return
			}
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
		return nil, fmt.Errorf("record kind %d", payload[0])
	}
	if len(d.b) > 0 {
		d.fail(fmt.Errorf("%d bytes left over", len(d.b)))
	}
	if d.err != nil {
		return nil, d.err
	}
	return change, nil
}

// cutShort reports whether p is the start of one record that goes on past
// it: the payload's own fields say where a record ends, whatever its
// frame's length says.
func cutShort(p []byte, v uint32) bool {
	_, err := decode(p, v)
	return errors.Is(err, errShort)
}
