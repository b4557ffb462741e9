package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
)

// Keys are like those of Facebook's USR pool (Atikoglu et al., SIGMETRICS
// 2012): 16 or 21 bytes, half each, with 2-byte values.
func key(i int) string {
	if i%2 == 0 {
		return fmt.Sprintf("usr:%012d", i)
	}
	return fmt.Sprintf("usr:user:%012d", i)
}

func value(i int) string { return fmt.Sprintf("%02d", i%100) }

// request is the UDP GET of key(i) with request id id: memcached's 8-byte
// UDP frame header (request id, sequence 0, 1 datagram, reserved 0), then
// the text command.
func request(id uint16, i int) []byte {
	return append([]byte{byte(id >> 8), byte(id), 0, 0, 0, 1, 0, 0}, "get "+key(i)+"\r\n"...)
}

// load sets every key over TCP (pipelined, noreply) and waits until
// memcached has read them all: it answers a no-op after the last one.
func load(conn net.Conn, items int) error {
	w := bufio.NewWriterSize(conn, 1<<16)
	for i := range items {
		fmt.Fprintf(w, "set %s 0 0 %d noreply\r\n%s\r\n", key(i), len(value(i)), value(i))
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
