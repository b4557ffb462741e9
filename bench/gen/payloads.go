package gen

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// MaxPayload is the longest payload of a request frame over IPv4
// (Ethernet, IPv4 and UDP headers: 42 bytes).
const MaxPayload = MaxFrame - (14 + 20 + 8)

// ReadPayloads reads a request file: one UDP payload per line, in hex
// (spaces between bytes allowed); blank lines and lines starting with #
// are skipped. A DNS query, a memcached GET or any other request can be
// written this way.
func ReadPayloads(r io.Reader) ([][]byte, error) {
	var out [][]byte
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p, err := hex.DecodeString(strings.Join(strings.Fields(line), ""))
		if err != nil {
			return nil, fmt.Errorf("line %d: not hex: %w", n, err)
		}
		if len(p) == 0 || len(p) > MaxPayload {
			return nil, fmt.Errorf("line %d: a payload of %d bytes; want 1 to %d", n, len(p), MaxPayload)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no requests")
	}
	return out, nil
}
