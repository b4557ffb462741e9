package agent

import (
	"sync"
	"time"
)

// sightingTTL is how long a zone's serial is remembered as first seen at
// a time: long enough for the windows that learn a new zone's forms.
const sightingTTL = time.Minute

// sightings are when learning first saw each zone's current serial. A
// zone not followed yet is followed from a form asked at least
// ChangeSettle after its serial was first seen: NSD's old server
// processes answer the old data for a few ms after a new one has
// answered the new serial, and a form asked then could have the old
// answer under the new serial, which no poll would ever see change.
type sightings struct {
	mu sync.Mutex
	at map[zoneKey]sighting
}

type sighting struct {
	serial uint32
	at     time.Time
}

// see notes that zone k had serial at time now.
func (s *sightings) see(k zoneKey, serial uint32, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[zoneKey]sighting{}
	}
	if old, ok := s.at[k]; !ok || old.serial != serial {
		s.at[k] = sighting{serial, now}
	}
}

// settled is whether zone k's serial was first seen at least settle before
// asked (false if it is not known).
func (s *sightings) settled(k zoneKey, serial uint32, asked time.Time, settle time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.at[k]
	return ok && old.serial == serial && !asked.Before(old.at.Add(settle))
}

// expire forgets sightings older than sightingTTL.
func (s *sightings) expire(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, old := range s.at {
		if now.Sub(old.at) > sightingTTL {
			delete(s.at, k)
		}
	}
}
