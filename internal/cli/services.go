package cli

import (
	"context"
	"flag"
	"io"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
)

type servicesOptions struct{}

func (*servicesOptions) flags(*flag.FlagSet) {}

func (*servicesOptions) run(ctx context.Context, e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	services, err := c.Services()
	if err != nil {
		return err
	}
	v := servicesView{Services: []serviceView{}}
	for _, s := range services {
		v.Services = append(v.Services, newServiceView(s))
	}
	return e.show(v)
}

type servicesView struct {
	Services []serviceView `json:"services"`
}

// serviceView is a service: an item of services, what attach prints.
type serviceView struct {
	ServiceID   uint32 `json:"service_id"`
	Protocol    string `json:"protocol"` // "udp", "tcp", or the protocol's number
	Family      uint8  `json:"family"`
	Address     string `json:"address"`
	Port        uint16 `json:"port"`
	Cookie      uint64 `json:"cookie"`
	NetnsCookie uint64 `json:"netns_cookie"`
	OwnerUID    uint32 `json:"owner_uid"`
	Rules       uint32 `json:"rules"`
	Manager     string `json:"manager"` // the client that attached it or set its learning

	addrPort netip.AddrPort // Address and Port, for the table
}

func newServiceView(s client.ServiceInfo) serviceView {
	addr := netip.AddrFrom16(s.Addr)
	if s.Family == 4 {
		addr = netip.AddrFrom4([4]byte(s.Addr[:4]))
	}
	proto := strconv.Itoa(int(s.Protocol))
	switch s.Protocol {
	case unix.IPPROTO_UDP:
		proto = "udp"
	case unix.IPPROTO_TCP:
		proto = "tcp"
	}
	return serviceView{
		ServiceID: s.ServiceID, Protocol: proto, Family: s.Family,
		Address: addr.String(), Port: s.Port,
		Cookie: s.Cookie, NetnsCookie: s.NetnsCookie,
		OwnerUID: s.OwnerUID, Rules: s.Rules, Manager: s.Manager,
		addrPort: netip.AddrPortFrom(addr, s.Port),
	}
}

func (v servicesView) table(w io.Writer) error { return serviceTable(w, v.Services...) }

func (v serviceView) table(w io.Writer) error { return serviceTable(w, v) }

func serviceTable(w io.Writer, services ...serviceView) error {
	t := newTable(w, "ID", "PROTO", "ADDRESS", "OWNER", "RULES", "COOKIE", "MANAGER")
	for _, s := range services {
		manager := shownName(s.Manager)
		if manager == "" {
			manager = "-"
		}
		t.row(s.ServiceID, s.Protocol, s.addrPort, s.OwnerUID, s.Rules, s.Cookie, manager)
	}
	return t.flush()
}
