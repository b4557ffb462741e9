// Package mcitems is the memcached data of the benchmarks: keys like
// Facebook's USR pool, their values, the UDP GET of each, and how to store
// them all in a memcached and check its replies.
package mcitems

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"

	"github.com/santa-offload/santa/internal/dnsload"
)

// Key i is like those of Facebook's USR pool (Atikoglu et al., SIGMETRICS
// 2012): 16 or 21 bytes, half each, with 2-byte values.
func Key(i int) string {
	if i%2 == 0 {
		return fmt.Sprintf("usr:%012d", i)
	}
	return fmt.Sprintf("usr:user:%012d", i)
}

// Value is key i's value.
func Value(i int) string { return fmt.Sprintf("%02d", i%100) }

// Request is the UDP GET of Key(i) with request id id: memcached's 8-byte
// UDP frame header (request id, sequence 0, 1 datagram, reserved 0), then
// the text command.
func Request(id uint16, i int) []byte {
	return append([]byte{byte(id >> 8), byte(id), 0, 0, 0, 1, 0, 0}, "get "+Key(i)+"\r\n"...)
}

// Forms are the UDP GETs of keys 0 to items-1 as forms of the socket
// client (internal/dnsload), whose id is memcached's request id.
func Forms(items int) []dnsload.Form {
	forms := make([]dnsload.Form, items)
	for i := range forms {
		forms[i] = dnsload.Form{Question: dnsload.Question{Name: Key(i)}, Bytes: Request(0, i)[2:]}
	}
	return forms
}

// Store sets keys 0 to items-1 over conn (TCP, pipelined, noreply) and
// waits until memcached has read them all: it answers a no-op after the
// last one.
func Store(conn net.Conn, items int) error {
	w := bufio.NewWriterSize(conn, 1<<16)
	for i := range items {
		fmt.Fprintf(w, "set %s 0 0 %d noreply\r\n%s\r\n", Key(i), len(Value(i)), Value(i))
	}
	io.WriteString(w, "mn\r\n")
	if err := w.Flush(); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("loading the keys: %w", err)
	}
	if line != "MN\r\n" {
		return fmt.Errorf("loading the keys: memcached said %q", line)
	}
	return nil
}

// CheckReply checks that reply is a hit with key i's value, in one
// datagram (any request id).
func CheckReply(i int, reply []byte) error {
	want := fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", Key(i), len(Value(i)), Value(i))
	if len(reply) < 8 || !bytes.Equal(reply[2:8], []byte{0, 0, 0, 1, 0, 0}) || string(reply[8:]) != want {
		return fmt.Errorf("memcached's reply to key %s is %q, not its value %q", Key(i), reply, want)
	}
	return nil
}
