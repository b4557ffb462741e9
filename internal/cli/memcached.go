package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"syscall"

	"github.com/santa-offload/santa/client"
)

// memcached invalidation (docs/memcached.md), by hand: an agent marks its
// services and reads generations itself; these commands are for looking.

// parserOptions: santactl parser SERVICE memcached [-domain ID] | none.
type parserOptions struct {
	domain string
}

func (o *parserOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.domain, "domain", "", "the service `ID` of the domain to join (default: the service starts its own)")
}

func (o *parserOptions) run(ctx context.Context, e *env, args []string) error {
	service, err := serviceArgs(args, 2, 2)
	if err != nil {
		return err
	}
	p := client.Parser{Kind: client.ParserMemcached, Domain: service}
	switch {
	case args[1] == "none" && o.domain != "":
		return usagef("-domain is for memcached; a service without a parser has no domain")
	case args[1] == "none":
		p = client.Parser{}
	case args[1] != "memcached":
		return usagef("parser %q: memcached or none", args[1])
	case o.domain != "":
		if p.Domain, err = parseID("-domain", o.domain); err != nil {
			return err
		}
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	return c.SetParser(service, p)
}

// generationOptions: santactl generation SERVICE KEY.
type generationOptions struct{}

func (*generationOptions) flags(*flag.FlagSet) {}

func (*generationOptions) run(ctx context.Context, e *env, args []string) error {
	service, err := serviceArgs(args, 2, 2)
	if err != nil {
		return err
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	g, err := c.Generation(service, []byte(args[1]))
	if err != nil {
		return err
	}
	key := []byte(args[1])
	return e.show(generationView{ServiceID: service, Key: newByteString(key), Gen: g.Gen, DomainGen: g.DomainGen,
		Epoch: g.Epoch, InFlight: g.InFlight, Fresh: g.Fresh, key: key})
}

type generationView struct {
	ServiceID uint32     `json:"service_id"`
	Key       byteString `json:"key"`
	Gen       uint32     `json:"gen"`
	DomainGen uint32     `json:"domain_gen"`
	Epoch     uint32     `json:"epoch"`
	InFlight  bool       `json:"in_flight"`
	Fresh     bool       `json:"fresh"`
	key       []byte
}

func (v generationView) table(w io.Writer) error {
	t := newTable(w)
	t.row("service", v.ServiceID)
	t.row("key", quote(v.key))
	t.row("generation", v.Gen)
	t.row("domain generation", v.DomainGen)
	t.row("domain life", v.Epoch)
	t.row("write in flight", v.InFlight)
	t.row("fresh", v.Fresh)
	return t.flush()
}

// memcachedView is a memcached domain's counters (client.MemcachedStats).
type memcachedView struct {
	Domain        uint32 `json:"domain"`
	Writes        uint64 `json:"writes"`
	KeyBumps      uint64 `json:"key_bumps"`
	DomainBumps   uint64 `json:"domain_bumps"`
	Completed     uint64 `json:"completed"`
	Released      uint64 `json:"released"`
	Overflow      uint64 `json:"overflow"`
	Lost          uint64 `json:"lost"`
	GuardStale    uint64 `json:"guard_stale"`
	GuardInFlight uint64 `json:"guard_inflight"`
	GuardExpired  uint64 `json:"guard_expired"`
	// Protocol version 3:
	UDPHeld      uint64 `json:"udp_held"`
	UDPTimedOut  uint64 `json:"udp_timed_out"`
	UDPDomain    uint64 `json:"udp_domain"`
	DelayedFlush uint64 `json:"delayed_flush"`
	Refreshed    uint64 `json:"refreshed"`
	FreshTorn    uint64 `json:"fresh_torn"`
	// Protocol version 4:
	Filled uint64 `json:"filled"`
}

// memcachedOf is the counters of service's memcached domain, nil for a
// service that is not memcached's (or a daemon without them).
func memcachedOf(c *client.Client, service uint32) (*memcachedView, error) {
	s, err := c.MemcachedStats(service)
	var ce *client.Error
	if errors.As(err, &ce) && (ce.Code == syscall.EINVAL || ce.Code == syscall.EPROTO) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := memcachedView(s)
	return &v, nil
}

// rows are the rows stats prints of the counters.
func (v *memcachedView) rows(t *table) {
	t.row("memcached domain", v.Domain)
	t.row("  writes", v.Writes)
	t.row("  key bumps", v.KeyBumps)
	t.row("  domain bumps", v.DomainBumps)
	t.row("  completed", v.Completed)
	t.row("  released", v.Released)
	t.row("  overflow", v.Overflow)
	t.row("  lost sync", v.Lost)
	t.row("  guard stale", v.GuardStale)
	t.row("  guard in flight", v.GuardInFlight)
	t.row("  guard expired", v.GuardExpired)
	t.row("  UDP held", v.UDPHeld)
	t.row("  UDP timed out", v.UDPTimedOut)
	t.row("  UDP held all", v.UDPDomain)
	t.row("  delayed flush", v.DelayedFlush)
	t.row("  sets answering", v.Refreshed)
	t.row("  torn dropped", v.FreshTorn)
	t.row("  refilled", v.Filled)
}
