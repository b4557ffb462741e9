package client

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/protocol"
)

// SetLearning and Hot speak version 2 to a daemon that agrees on it, and
// the services it lists carry their manager.
// learningDaemon is a daemon of protocol version that keeps the last
// LEARN, answers HOT with hot's reply and LIST_SERVICES with service 3,
// managed by santa-offload.
func learningDaemon(t *testing.T, version uint16, hot func(*protocol.Hot) protocol.Body) (c *Client, learned func() *protocol.Learn) {
	var mu sync.Mutex
	var got *protocol.Learn
	path := serve(t, func(req protocol.Body, _ []int) protocol.Body {
		mu.Lock()
		defer mu.Unlock()
		switch req := req.(type) {
		case *protocol.Hello:
			return &protocol.HelloReply{Version: version}
		case *protocol.Learn:
			got = req
			return &protocol.LearnReply{}
		case *protocol.Hot:
			return hot(req)
		case *protocol.ListServices:
			return &protocol.ListServicesReply{Next: protocol.LastPage, Services: []protocol.ServiceInfo{{ServiceID: 3, Manager: "santa-offload"}}}
		}
		return protocol.Errorf(syscall.EINVAL, "unexpected %v", req.Type())
	})
	return dialTo(t, path), func() *protocol.Learn {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

func TestLearning(t *testing.T) {
	c, learned := learningDaemon(t, protocol.Version2, func(req *protocol.Hot) protocol.Body {
		if req.ServiceID != 3 || req.Max != 2 {
			return protocol.Errorf(syscall.EINVAL, "asked %+v", req)
		}
		return &protocol.HotReply{WindowMS: 1000, Requests: []protocol.HotRequest{{Passes: 5, Key: []byte("a")}, {Passes: 2, Key: []byte("b")}}}
	})
	if err := c.SetLearning(3, Learning{KeyOffset: 2, ProbePort: 5300, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := learned(), (&protocol.Learn{ServiceID: 3, KeyOff: 2, ProbePort: 5300, Enable: true}); !reflect.DeepEqual(got, want) {
		t.Errorf("LEARN sent %+v, want %+v", got, want)
	}
	hot, err := c.Hot(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := HotSet{Window: time.Second, Requests: []HotRequest{{Passes: 5, Key: []byte("a")}, {Passes: 2, Key: []byte("b")}}}
	if !reflect.DeepEqual(hot, want) {
		t.Errorf("Hot gives %+v, want %+v", hot, want)
	}
	if _, err := c.Hot(3, -1); err == nil || !strings.Contains(err.Error(), "max is -1") {
		t.Errorf("Hot(-1) gives %v", err)
	}
	services, err := c.Services()
	if err != nil || len(services) != 1 || services[0].Manager != "santa-offload" {
		t.Errorf("Services gives %+v, %v", services, err)
	}
}

// A daemon of version 1 has no learning: the client says so without
// sending anything it would not understand.
func TestLearningNeedsVersion2(t *testing.T) {
	old := &fake{newest: protocol.Version1}
	c := dialTo(t, serve(t, old.handle))
	err := c.SetLearning(fakeService, Learning{Enabled: true})
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != syscall.EPROTO || !strings.Contains(err.Error(), "protocol version 2") {
		t.Errorf("SetLearning on version 1 gives %v", err)
	}
	if _, err := c.Hot(fakeService, 1); !errors.As(err, &pe) {
		t.Errorf("Hot on version 1 gives %v", err)
	}
	// The connection is still good.
	if _, err := c.Services(); err != nil {
		t.Errorf("after a refused LEARN: %v", err)
	}
}

// In version 6 SetLearning sends the counts asked for, and Hot tells the
// share of passes counted; to an older daemon, counts are refused before
// anything is sent.
func TestLearningCounts(t *testing.T) {
	for _, version := range []uint16{protocol.Version5, protocol.Version6} {
		c, learned := learningDaemon(t, version, func(*protocol.Hot) protocol.Body {
			return &protocol.HotReply{WindowMS: 1000, Window: 2, Total: 1, CountedPPM: 125000,
				Requests: []protocol.HotRequest{{Passes: 8, Key: []byte("a")}}}
		})
		err := c.SetLearning(3, Learning{KeyOffset: 2, Enabled: true, Counts: 12500})
		switch got := learned(); {
		case version == protocol.Version5 && (!errors.As(err, new(*Error)) || !strings.Contains(err.Error(), "counts needs protocol version 6") || got != nil):
			t.Errorf("version 5: SetLearning with counts gives %v, sent %+v; want it refused, nothing sent", err, got)
		case version == protocol.Version6 && (err != nil || got == nil || got.Counts != 12500):
			t.Errorf("version 6: SetLearning with counts gives %v, sent %+v; want counts 12500", err, got)
		}
		want := uint32(125000)
		if version < protocol.Version6 {
			want = 0 // does not travel
		}
		if hot, err := c.Hot(3, 1); err != nil || hot.CountedPPM != want {
			t.Errorf("version %d: Hot gives %+v (%v); want counted_ppm %d", version, hot, err, want)
		}
	}
}

// From a daemon of version 5, Hot reads a set larger than one reply in
// pages, and starts over when a new window's set replaced the one it was
// reading; from a version 4 daemon it takes the one reply.
func TestHotPages(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		name    string
		version uint16
		changes int // windows that end while the set is read
		want    string
		asks    int
	}{
		{"version 5", protocol.Version5, 0, "abcd", 2},
		{"version 5, a window ends between pages", protocol.Version5, 1, "abcd", 4},
		{"version 4", protocol.Version4, 0, "ab", 1},
	} {
		var mu sync.Mutex
		window, asks, changes := uint32(1), 0, tc.changes
		path := serve(t, func(req protocol.Body, _ []int) protocol.Body {
			mu.Lock()
			defer mu.Unlock()
			switch req := req.(type) {
			case *protocol.Hello:
				return &protocol.HelloReply{Version: tc.version}
			case *protocol.Hot:
				asks++
				if req.From > 0 && changes > 0 {
					changes--
					window++
				}
				// Two keys a page, as if no more fit.
				from := min(int(req.From), len(keys))
				page := keys[from:min(from+2, from+int(req.Max), len(keys))]
				r := &protocol.HotReply{WindowMS: 1000, Window: window, Total: uint32(len(keys))}
				for i, k := range page {
					r.Requests = append(r.Requests, protocol.HotRequest{Passes: uint32(10*window - uint32(from+i)), Key: []byte(k)})
				}
				return r
			}
			return protocol.Errorf(syscall.EINVAL, "unexpected %v", req.Type())
		})
		c := dialTo(t, path)
		hot, err := c.Hot(3, 4)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		mu.Lock()
		got := ""
		for i, r := range hot.Requests {
			got += string(r.Key)
			if want := 10*window - uint32(i); r.Passes != want {
				t.Errorf("%s: %s has passes %d, want %d: pages of two windows", tc.name, r.Key, r.Passes, want)
			}
		}
		if got != tc.want || asks != tc.asks {
			t.Errorf("%s: Hot(4) gives %q in %d asks, want %q in %d", tc.name, got, asks, tc.want, tc.asks)
		}
		mu.Unlock()
	}
}
