package client

import (
	"fmt"
	"iter"

	"github.com/santa-offload/santa/internal/protocol"
)

// Rules iterates over a service's rules in rising id order, a page at a
// time. An error ends the iteration.
func (c *Client) Rules(service uint32) iter.Seq2[RuleEntry, error] {
	return pages(c, fmt.Sprintf("list rules of service %d", service),
		func(start uint32) protocol.Body {
			return &protocol.ListRules{ServiceID: service, Start: start}
		},
		func(r *protocol.ListRulesReply) ([]RuleEntry, uint32) { return r.Rules, r.Next })
}

// RuleStats iterates over the counters of a service's rules in rising id
// order, a page at a time. An error ends the iteration.
func (c *Client) RuleStats(service uint32) iter.Seq2[RuleCounters, error] {
	return pages(c, fmt.Sprintf("rule stats of service %d", service),
		func(start uint32) protocol.Body {
			return &protocol.RuleStats{ServiceID: service, Start: start}
		},
		func(r *protocol.RuleStatsReply) ([]RuleCounters, uint32) { return r.Counters, r.Next })
}

// AllServices iterates over the client's services, or every service for
// an admin, in rising id order, a page at a time (protocol version 7). A
// service santad has throughout the iteration is yielded once; one
// attached or detached meanwhile may be or not. A daemon of an older
// version has no pages: its one reply is the whole list, and it refuses
// (EPROTONOSUPPORT) a list that does not fit one. An error ends the iteration.
func (c *Client) AllServices() iter.Seq2[ServiceInfo, error] {
	paged := c.version >= protocol.Version7
	return pages(c, "list services",
		func(start uint32) protocol.Body { return &protocol.ListServices{Start: start} },
		func(r *protocol.ListServicesReply) ([]ServiceInfo, uint32) {
			if !paged {
				return r.Services, protocol.LastPage
			}
			return r.Services, r.Next
		})
}

// pages requests page after page, from start 0 until the last, and yields
// their items. The lock is not held while yielding, so the loop body may
// use the client.
func pages[R protocol.Body, T any](c *Client, what string, request func(start uint32) protocol.Body, items func(R) ([]T, uint32)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var none T
		for start := uint32(0); ; {
			r, err := call[R](c, request(start), nil)
			if err != nil {
				yield(none, fmt.Errorf("%s: %w", what, err))
				return
			}
			page, next := items(r)
			for _, item := range page {
				if !yield(item, nil) {
					return
				}
			}
			if next == protocol.LastPage {
				return
			}
			// A next that does not move on would loop forever.
			if next <= start {
				yield(none, fmt.Errorf("%s: page from %d says the next starts at %d", what, start, next))
				return
			}
			start = next
		}
	}
}
