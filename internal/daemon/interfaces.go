package daemon

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/santa-offload/santa/internal/protocol"
)

// attachInterfaces runs the data plane on the named interfaces, or on
// every interface that is up if none is named. A named interface that
// cannot be attached is an error; one found up is skipped with a warning.
func attachInterfaces(dp Plane, names []string, log *slog.Logger) ([]protocol.Interface, error) {
	explicit := len(names) > 0
	if !explicit {
		all, err := net.Interfaces()
		if err != nil {
			return nil, fmt.Errorf("listing interfaces: %w", err)
		}
		for _, iface := range all {
			if iface.Flags&net.FlagUp != 0 {
				names = append(names, iface.Name)
			}
		}
	}
	var out []protocol.Interface
	for _, name := range names {
		att, err := dp.Attach(name)
		if err == nil {
			var iface *net.Interface
			if iface, err = net.InterfaceByName(name); err == nil {
				out = append(out, protocol.Interface{Ifindex: uint32(iface.Index), Name: name, XDP: string(att.XDP), TC: att.TC})
				log.Info("attached", "interface", name, "xdp", att.XDP, "tc", att.TC)
				continue
			}
		}
		if explicit {
			return nil, fmt.Errorf("attaching %s: %w", name, err)
		}
		log.Warn("not attaching an interface", "interface", name, "err", err)
	}
	return out, nil
}
