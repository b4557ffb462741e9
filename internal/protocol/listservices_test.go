package protocol

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// Version 7 pages LIST_SERVICES; earlier versions carry neither the
// request's start and max nor the reply's next, and refuse to send a page
// where the whole list is due.
func TestListServicesPages(t *testing.T) {
	for v := uint16(MinVersion); v < Version7; v++ {
		for _, b := range []Body{&ListServices{Start: 5}, &ListServices{Max: 2}, &ListServicesReply{Next: 9}} {
			_, err := Encode(v, 1, b)
			var pe *Error
			if !errors.As(err, &pe) || pe.Code != syscall.EINVAL || !strings.Contains(pe.Message, "protocol version 7") {
				t.Errorf("encoding %+v in version %d: %v; want EINVAL naming version 7", b, v, err)
			}
		}
		// The whole list, told as such or not, is version 1's body.
		for _, next := range []uint32{0, LastPage} {
			msg, err := Encode(v, 1, &ListServicesReply{Next: next, Services: []ServiceInfo{{ServiceID: 1}}})
			if err != nil {
				t.Fatalf("version %d: %v", v, err)
			}
			_, got, err := Decode(msg)
			if err != nil || got.(*ListServicesReply).Next != 0 || len(got.(*ListServicesReply).Services) != 1 {
				t.Errorf("version %d: decoded %+v, %v; want one service, next 0", v, got, err)
			}
		}
	}
	for _, s := range []ServiceInfo{{ServiceID: 1}, {ServiceID: 2, Manager: strings.Repeat("m", MaxClientName)}} {
		for _, v := range []uint16{Version1, Version2, Version7} {
			one, _ := Encode(v, 1, &ListServicesReply{Next: LastPage, Services: []ServiceInfo{s}})
			none, _ := Encode(v, 1, &ListServicesReply{Next: LastPage})
			if got := ServiceInfoSize(v, &s); got != len(one)-len(none) {
				t.Errorf("ServiceInfoSize(%d, %q) = %d; it takes %d", v, s.Manager, got, len(one)-len(none))
			}
			if len(none) != ListServicesOverhead(v) {
				t.Errorf("ListServicesOverhead(%d) = %d; an empty reply is %d", v, ListServicesOverhead(v), len(none))
			}
			if n := ServiceInfoSize(v, &s); n < MinServiceInfoSize || n > MaxServiceInfoSize {
				t.Errorf("ServiceInfoSize(%d, %q) = %d, outside %d to %d", v, s.Manager, n, MinServiceInfoSize, MaxServiceInfoSize)
			}
		}
	}
}
