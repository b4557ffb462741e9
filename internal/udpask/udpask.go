// Package udpask asks a UDP server whose requests and replies carry a
// 16-bit id in their first two bytes (DNS's transaction id, memcached's
// UDP request id) many requests at once and collects its replies: the
// bytes offload rules answer with, and what test clients check against.
package udpask

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Replies asks the server (through conn) for every item in items and
// returns its replies with id 0: the bytes Santa's rules answer with. A
// window of requests is in flight, told apart by their ids (item k of
// items has id k mod 2^16, so a late reply to an earlier window is not
// taken for one of this window); lost ones are asked again, up to 5 times.
func Replies(conn net.Conn, request func(id uint16, item int) []byte, items []int) ([][]byte, error) {
	const window = 64
	replies := make([][]byte, len(items))
	buf := make([]byte, 65536)
	for start := 0; start < len(items); start += window {
		batch := items[start:min(len(items), start+window)]
		for try := 0; ; try++ {
			missing := 0
			for i, item := range batch {
				if replies[start+i] == nil {
					if _, err := conn.Write(request(uint16(start+i), item)); err != nil {
						return nil, err
					}
					missing++
				}
			}
			if missing == 0 {
				break
			}
			if try == 5 {
				return nil, fmt.Errorf("no reply to %d requests after 5 tries", missing)
			}
			conn.SetReadDeadline(time.Now().Add(time.Second))
			for range missing {
				k, err := conn.Read(buf)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				if err != nil {
					return nil, err
				}
				if k < 2 {
					continue
				}
				i := int(binary.BigEndian.Uint16(buf) - uint16(start))
				if i < len(batch) && replies[start+i] == nil {
					r := append([]byte(nil), buf[:k]...)
					r[0], r[1] = 0, 0
					replies[start+i] = r
				}
			}
		}
	}
	return replies, nil
}
