package mccheck

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Reading memcached's replies, from a TCP stream or a UDP datagram's
// payload alike.

// maxData bounds a value read: the checker's are under 1 KiB.
const maxData = 1 << 20

// readLine reads one line, without its CRLF.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err == io.EOF {
		return "", errors.New("the reply stops short: memcached closed the connection, or the datagram ends")
	}
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("a line %q not ended by CRLF", line)
	}
	return line[:len(line)-2], nil
}

// readData reads a value's n bytes and their CRLF.
func readData(r *bufio.Reader, n string) (string, error) {
	size, err := strconv.Atoi(n)
	if err != nil || size < 0 || size > maxData {
		return "", fmt.Errorf("a value of %q bytes", n)
	}
	b := make([]byte, size+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	if string(b[size:]) != "\r\n" {
		return "", fmt.Errorf("a value of %d bytes not ended by CRLF: %q", size, b)
	}
	return string(b[:size]), nil
}

// readWriteReply reads a write's reply: its line, and a VA's data.
func readWriteReply(r *bufio.Reader) (line, data string, err error) {
	if line, err = readLine(r); err != nil {
		return "", "", err
	}
	if f := strings.Fields(line); len(f) >= 2 && f[0] == "VA" {
		data, err = readData(r, f[1])
	}
	return line, data, err
}

// getReply is a read's result: hit (value, and cas for gets), miss, or
// failed with what came instead (value). err is an I/O error or a reply
// that leaves the stream unreadable.
type getReply struct {
	outcome, value, cas string
}

// readGetReply reads the reply to `get key`, `gets key` or (meta) `mg key
// v`.
func readGetReply(r *bufio.Reader, key string, meta bool) (getReply, error) {
	line, err := readLine(r)
	if err != nil {
		return getReply{}, err
	}
	f := strings.Fields(line)
	switch {
	case meta && line == "EN", !meta && line == "END":
		return getReply{outcome: miss}, nil
	case meta && len(f) >= 2 && f[0] == "VA":
		v, err := readData(r, f[1])
		return getReply{outcome: hit, value: v}, err
	case !meta && (len(f) == 4 || len(f) == 5) && f[0] == "VALUE":
		v, err := readData(r, f[3])
		if err != nil {
			return getReply{}, err
		}
		if end, err := readLine(r); err != nil || end != "END" {
			return getReply{}, fmt.Errorf("after a value, %q (%v), not END", end, err)
		}
		if f[1] != key {
			return getReply{outcome: failed, value: fmt.Sprintf("%s\\r\\n%s", line, v)}, nil
		}
		g := getReply{outcome: hit, value: v}
		if len(f) == 5 {
			g.cas = f[4]
		}
		return g, nil
	}
	return getReply{outcome: failed, value: line}, nil
}
