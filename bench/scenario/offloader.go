package scenario

import (
	"fmt"
	"os"
	"time"

	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// offloader keeps the top n items offloaded to Santa on the server's
// sockets: rules for items 0..n-1 on each, XDP attached to the server veth
// while n > 0.
type offloader struct {
	r        rig.Rig
	d        *datapath.Datapath
	svcs     []model.ServiceID
	rule     func(i int) rule.Rule
	ids      [][]model.RuleID // per service, rule of item i at i
	attached bool
}

// newOffloader registers fds (copies of the server's sockets, which the
// caller keeps open) as services, room for items rules on each.
func newOffloader(r rig.Rig, fds []int, items int, rule func(i int) rule.Rule) (*offloader, error) {
	maxRules := uint32(1024)
	for maxRules < uint32(2*len(fds)*items) {
		maxRules <<= 1
	}
	o := &offloader{r: r, rule: rule}
	var err error
	// Opened in the server's namespace, whose addresses it answers for and
	// where it is attached.
	err = rig.InNetns(r.ServerNS(), func() (err error) {
		o.d, err = datapath.Open(datapath.Options{NoPin: true, MaxRules: maxRules, MaxServices: 16})
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		svc, err := o.d.AddSocket(fd)
		if err != nil {
			o.close()
			return nil, err
		}
		o.svcs = append(o.svcs, svc)
		o.ids = append(o.ids, nil)
	}
	fmt.Fprintf(os.Stderr, "  santa: %d server socket(s) taken over\n", len(fds))
	return o, nil
}

// set offloads exactly the top n items: the sets are nested, so it adds or
// deletes only the difference.
func (o *offloader) set(n int) error {
	for i, svc := range o.svcs {
		have := len(o.ids[i])
		switch {
		case n > have:
			rs := make([]rule.Rule, 0, n-have)
			for k := have; k < n; k++ {
				rs = append(rs, o.rule(k))
			}
			ids, err := o.d.AddRules(svc, rs)
			if err != nil {
				return err
			}
			o.ids[i] = append(o.ids[i], ids...)
		case n < have:
			if err := o.d.DeleteRules(o.ids[i][n:]); err != nil {
				return err
			}
			o.ids[i] = o.ids[i][:n]
		}
	}
	if err := o.attach(n > 0); err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond) // let the change settle before a run
	return nil
}

// attach attaches Santa to the server veth, or detaches it.
func (o *offloader) attach(on bool) error {
	switch {
	case on && !o.attached:
		if err := rig.InNetns(o.r.ServerNS(), func() error {
			att, err := o.d.Attach(o.r.ServerDev())
			if err == nil && att.XDP != model.XDPNative {
				err = fmt.Errorf("XDP attached in %s mode, not native", att.XDP)
			}
			return err
		}); err != nil {
			return err
		}
		o.attached = true
	case !on && o.attached:
		if err := o.d.Detach(o.r.ServerDev()); err != nil {
			return err
		}
		o.attached = false
	}
	return nil
}

// learn turns the counting of passed requests by their bytes from keyOff
// on (or off) on every socket.
func (o *offloader) learn(keyOff uint16, on bool) error {
	for _, svc := range o.svcs {
		if err := o.d.SetLearning(svc, model.Learning{KeyOffset: keyOff, Enabled: on}); err != nil {
			return err
		}
	}
	return nil
}

// answered is how many requests Santa has answered on all the sockets.
func (o *offloader) answered() (uint64, error) {
	var sum uint64
	for _, svc := range o.svcs {
		st, err := o.d.ServiceStats(svc)
		if err != nil {
			return 0, err
		}
		sum += st.Matched
	}
	return sum, nil
}

func (o *offloader) close() {
	if o.attached {
		o.d.Detach(o.r.ServerDev())
	}
	o.d.Close()
}
