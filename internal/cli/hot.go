package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// hotOptions: santactl hot prints what a learning service passed most in
// the last window (protocol version 2).
type hotOptions struct {
	n int
}

func (o *hotOptions) flags(fs *flag.FlagSet) {
	fs.IntVar(&o.n, "n", 20, "show the `N` most passed requests (0: as many as one reply holds)")
}

func (o *hotOptions) run(ctx context.Context, e *env, args []string) error {
	service, err := serviceArgs(args, 1, 1)
	if err != nil {
		return err
	}
	if o.n < 0 {
		return usagef("-n %d is negative", o.n)
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	set, err := c.Hot(service, o.n)
	if err != nil {
		return err
	}
	v := hotView{Service: service, WindowMS: set.Window.Milliseconds(), CountedPPM: set.CountedPPM, Requests: []hotRequestView{}}
	for _, r := range set.Requests {
		v.Requests = append(v.Requests, hotRequestView{Passes: r.Passes, Key: newByteString(r.Key), key: r.Key})
	}
	return e.show(v)
}

type hotView struct {
	Service  uint32 `json:"service_id"`
	WindowMS int64  `json:"window_ms"`
	// The share of the passed requests counted, in millionths (0: not
	// told, a daemon before protocol version 6).
	CountedPPM uint32           `json:"counted_ppm,omitempty"`
	Requests   []hotRequestView `json:"requests"`
}

type hotRequestView struct {
	Passes uint32     `json:"passes"`
	Key    byteString `json:"key"`
	key    []byte
}

func (v hotView) table(w io.Writer) error {
	counted := ""
	if v.CountedPPM > 0 && v.CountedPPM < 1e6 {
		counted = fmt.Sprintf(" (%.1f %% of them counted, scaled up)", float64(v.CountedPPM)/1e4)
	}
	fmt.Fprintf(w, "service %d, passed in the last %.1f s%s:\n", v.Service, float64(v.WindowMS)/1000, counted)
	t := newTable(w, "PASSES", "BYTES", "KEY")
	for _, r := range v.Requests {
		t.row(r.Passes, len(r.key), quote(r.key))
	}
	return t.flush()
}
