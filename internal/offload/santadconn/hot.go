package santadconn

import (
	"iter"
	"time"

	"github.com/santa-offload/santa/client"
)

// HotRates reads the hot sets of services with hot, at most most forms
// each, and merges them, as an agent whose services are the sockets of one
// SO_REUSEPORT group (or of one server) sees them: each passed form's
// passes a second, summed over the services; the longest of their windows
// (one santad has not timed yet counts as a second); and the least share
// of passed requests they counted (client.HotSet.CountedShare), on which
// a rate's evidence rests. The first failed read is the error.
func HotRates(hot func(service uint32, max int) (client.HotSet, error), services iter.Seq[uint32], most int) (
	rates map[string]float64, window time.Duration, share float64, err error) {
	rates, share = map[string]float64{}, 1
	for id := range services {
		h, err := hot(id, most)
		if err != nil {
			return nil, 0, 0, err
		}
		share = min(share, h.CountedShare())
		w := h.Window
		if w <= 0 {
			w = time.Second
		}
		window = max(window, w)
		for _, r := range h.Requests {
			rates[string(r.Key)] += float64(r.Passes) / w.Seconds()
		}
	}
	return rates, window, share, nil
}
