package client

import (
	"fmt"

	"github.com/santa-offload/santa/internal/protocol"
)

// PathCount is one of the host's path counters: how many packets left a
// program by one exit (docs/architecture.md, docs/tcp.md "Counters").
type PathCount = protocol.PathCount

// PathStats reads the host's path counters, in the order of their names
// (protocol version 2; a santad older than PATH_STATS refuses it with
// EPROTO and closes the connection).
func (c *Client) PathStats() ([]PathCount, error) {
	r, err := call[*protocol.PathStatsReply](c, &protocol.PathStats{}, nil)
	if err != nil {
		return nil, fmt.Errorf("path stats: %w", err)
	}
	return r.Paths, nil
}
