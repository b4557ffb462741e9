package client

import (
	"cmp"
	"slices"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/protocol/protocoltest"
	"github.com/santa-offload/santa/rule"
)

// fake is a tiny santad: one service (fakeService) whose rules it keeps,
// pages of pageSize, and one transaction id (fakeTxn) that holds only
// additions: it accepts replacements and deletions but drops them.
type fake struct {
	mu      sync.Mutex
	rules   []RuleEntry // by rising id
	nextID  uint32
	pending []RuleEntry // added in the open transaction, with their ids
	cookies []uint64    // SO_COOKIE of each socket attached
	client  string      // the name HELLO gave
	hello   protocol.Hello
	newest  uint16 // the newest protocol version it speaks; 0: protocol.MaxVersion
}

const (
	fakeService = 7
	fakeTxn     = 9
	pageSize    = 2
)

// serve serves handle as a fake santad and returns its socket's path.
func serve(t *testing.T, handle protocoltest.Handler) string {
	return protocoltest.Serve(t, nil, handle)
}

func (f *fake) handle(req protocol.Body, fds []int) protocol.Body {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := serviceOf(req); ok && id != fakeService {
		return protocol.Errorf(syscall.ENOENT, "no service %d", id)
	}
	switch req := req.(type) {
	case *protocol.Hello:
		f.client, f.hello = req.Client, *req
		v := min(req.MaxVersion, cmp.Or(f.newest, protocol.MaxVersion))
		return &protocol.HelloReply{Version: v, UID: 1000, GID: 100, PID: 42, QuotaRules: 65536, Daemon: "fake"}
	case *protocol.Attach:
		if len(fds) != 1 {
			return protocol.Errorf(syscall.EBADF, "%d fds", len(fds))
		}
		cookie, err := unix.GetsockoptUint64(fds[0], unix.SOL_SOCKET, unix.SO_COOKIE)
		if err != nil {
			return protocol.Errorf(syscall.ENOTSOCK, "%v", err)
		}
		f.cookies = append(f.cookies, cookie)
		return &protocol.ServiceInfo{ServiceID: fakeService, Protocol: 17, Family: 4, Cookie: cookie}
	case *protocol.Detach:
		return &protocol.DetachReply{}
	case *protocol.AddRules:
		for i, r := range req.Rules {
			if err := r.Validate(rule.DefaultUDPLimits); err != nil {
				return protocol.ErrorAt(syscall.EINVAL, uint32(i), "%v", err)
			}
		}
		if req.Txn != 0 {
			// ids now, rules at COMMIT, as santad does
			ids := f.newIDs(len(req.Rules))
			for i, r := range req.Rules {
				f.pending = append(f.pending, RuleEntry{RuleID: ids[i], Rule: r})
			}
			return &protocol.AddRulesReply{RuleIDs: ids}
		}
		ids := f.newIDs(len(req.Rules))
		for i, r := range req.Rules {
			f.rules = append(f.rules, RuleEntry{RuleID: ids[i], Rule: r})
		}
		return &protocol.AddRulesReply{RuleIDs: ids}
	case *protocol.ReplaceRules:
		if req.Txn == fakeTxn {
			return &protocol.ReplaceRulesReply{}
		}
		for i, u := range req.Updates {
			j := f.find(u.RuleID)
			if j < 0 {
				return protocol.ErrorAt(syscall.ENOENT, uint32(i), "no rule %d", u.RuleID)
			}
			f.rules[j].Rule = u.Rule
		}
		return &protocol.ReplaceRulesReply{}
	case *protocol.DeleteRules:
		if req.Txn == fakeTxn {
			return &protocol.DeleteRulesReply{}
		}
		for i, id := range req.RuleIDs {
			j := f.find(id)
			if j < 0 {
				return protocol.ErrorAt(syscall.ENOENT, uint32(i), "no rule %d", id)
			}
			f.rules = slices.Delete(f.rules, j, j+1)
		}
		return &protocol.DeleteRulesReply{}
	case *protocol.Begin:
		return &protocol.BeginReply{Txn: fakeTxn}
	case *protocol.Commit:
		f.rules = append(f.rules, f.pending...)
		added := len(f.pending)
		f.pending = nil
		return &protocol.CommitReply{Added: uint32(added)}
	case *protocol.Abort:
		f.nextID -= uint32(len(f.pending)) // given back, as santad does
		f.pending = nil
		return &protocol.AbortReply{}
	case *protocol.ListServices:
		return &protocol.ListServicesReply{Next: protocol.LastPage, Services: []ServiceInfo{{ServiceID: fakeService, Rules: uint32(len(f.rules))}}}
	case *protocol.ListRules:
		page, next := f.page(req.Start)
		return &protocol.ListRulesReply{Next: next, Rules: page}
	case *protocol.RuleStats:
		page, next := f.page(req.Start)
		r := &protocol.RuleStatsReply{Next: next}
		for _, e := range page {
			r.Counters = append(r.Counters, RuleCounters{RuleID: e.RuleID, Hits: uint64(e.RuleID) * 10})
		}
		return r
	case *protocol.ServiceStats:
		return &protocol.ServiceStatsReply{Matched: 5, Rules: uint32(len(f.rules))}
	case *protocol.Status:
		return &protocol.StatusReply{Daemon: "fake", Services: 1, Interfaces: []Interface{{Ifindex: 1, Name: "lo", XDP: "generic"}}}
	}
	return protocol.Errorf(syscall.EPROTO, "unexpected %v", req.Type())
}

// serviceOf is the service a request names.
func serviceOf(req protocol.Body) (uint32, bool) {
	switch req := req.(type) {
	case *protocol.Detach:
		return req.ServiceID, true
	case *protocol.AddRules:
		return req.ServiceID, true
	case *protocol.ReplaceRules:
		return req.ServiceID, true
	case *protocol.DeleteRules:
		return req.ServiceID, true
	case *protocol.Begin:
		return req.ServiceID, true
	case *protocol.ListRules:
		return req.ServiceID, true
	case *protocol.RuleStats:
		return req.ServiceID, true
	case *protocol.ServiceStats:
		return req.ServiceID, true
	}
	return 0, false
}

// newIDs hands out n rule ids.
func (f *fake) newIDs(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		f.nextID++
		ids[i] = f.nextID
	}
	return ids
}

func (f *fake) find(id uint32) int {
	return slices.IndexFunc(f.rules, func(e RuleEntry) bool { return e.RuleID == id })
}

// page is up to pageSize rules from id start on, and the next page's start.
func (f *fake) page(start uint32) ([]RuleEntry, uint32) {
	i, _ := slices.BinarySearchFunc(f.rules, start, func(e RuleEntry, id uint32) int { return int(e.RuleID) - int(id) })
	page := f.rules[i:min(i+pageSize, len(f.rules))]
	if i+pageSize >= len(f.rules) {
		return page, protocol.LastPage
	}
	return page, f.rules[i+pageSize].RuleID
}
