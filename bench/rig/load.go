package rig

import (
	"net/netip"

	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/internal/popularity"
)

// Requests are IPv4 UDP request frames from the client's port src to the
// server's port dst, one per payload.
func Requests(src, dst uint16, payloads [][]byte) [][]byte {
	return gen.UDPFrames(gen.Endpoints{SrcMAC: ClientMAC, DstMAC: ServerMAC,
		Src: netip.AddrPortFrom(netip.MustParseAddr(ClientIPv4), src),
		Dst: netip.AddrPortFrom(netip.MustParseAddr(ServerIPv4), dst)}, payloads)
}

// OpenGenerator loads a generator on the client veth (c.Ifindex is set
// here): it sends from the client and counts the replies there.
func (r Rig) OpenGenerator(c gen.Config) (*gen.Generator, error) {
	return openOn(r.ClientNS(), r.ClientDev(), c)
}

// OpenSink loads a counter on the server veth: a generator that never
// sends, whose reply counter counts the requests arriving for port (and
// drops them), so that what reaches the server is known without a server.
func (r Rig) OpenSink(port uint16, request []byte) (*gen.Generator, error) {
	return openOn(r.ServerNS(), r.ServerDev(), gen.Config{Requests: [][]byte{request}, ReplyPort: port,
		Popularity: popularity.Uniform, SequenceLen: 1})
}

func openOn(ns, dev string, c gen.Config) (*gen.Generator, error) {
	var g *gen.Generator
	err := OnDev(ns, dev, func(ifindex int) error {
		c.Ifindex = ifindex
		var err error
		g, err = gen.Open(c)
		return err
	})
	return g, err
}
