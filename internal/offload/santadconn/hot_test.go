package santadconn

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
)

// HotRates adds the services' passes a second up, form by form, over
// each set's own window (an untimed one a second), and keeps the longest
// window and the least share counted; a failed read fails it.
func TestHotRates(t *testing.T) {
	sets := map[uint32]client.HotSet{
		1: {Window: 2 * time.Second, CountedPPM: 500000, Requests: []client.HotRequest{{Passes: 10, Key: []byte("a")}, {Passes: 4, Key: []byte("b")}}},
		2: {Window: 500 * time.Millisecond, CountedPPM: 250000, Requests: []client.HotRequest{{Passes: 3, Key: []byte("a")}}},
		3: {Requests: []client.HotRequest{{Passes: 7, Key: []byte("c")}}},
	}
	hot := func(id uint32, most int) (client.HotSet, error) {
		if most != 100 {
			t.Errorf("read %d forms of service %d; want 100", most, id)
		}
		if s, ok := sets[id]; ok {
			return s, nil
		}
		return client.HotSet{}, errors.New("no such service")
	}
	rates, window, share, err := HotRates(hot, slices.Values([]uint32{1, 2, 3}), 100)
	want := map[string]float64{"a": 10.0/2 + 3/0.5, "b": 4.0 / 2, "c": 7}
	if err != nil || !maps.Equal(rates, want) || window != 2*time.Second || share != 0.25 {
		t.Errorf("HotRates = %v, %v, %v, %v; want %v, 2s, 0.25", rates, window, share, err, want)
	}
	if _, window, share, _ := HotRates(hot, slices.Values([]uint32{3}), 100); window != time.Second || share != 1 {
		t.Errorf("an untimed, wholly counted set: window %v, share %v; want 1s, 1", window, share)
	}
	if _, _, _, err := HotRates(hot, slices.Values([]uint32{1, 9}), 100); err == nil {
		t.Error("a failed read is not an error")
	}
}
