// Package indexhome runs the data plane's santa_index_home
// (bpf/include/index_home.h) on keys, through BPF_PROG_TEST_RUN, for the
// test that holds user space's copy of the probe hash to it.
package indexhome

import (
	"fmt"

	"github.com/cilium/ebpf"
)

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel indexhome ../bpf/index_home.bpf.c -- -I../../bpf/include

// Hasher is the loaded program.
type Hasher struct {
	objs indexhomeObjects
}

// Load loads the program (root, or CAP_BPF).
func Load() (*Hasher, error) {
	h := &Hasher{}
	if err := loadIndexhomeObjects(&h.objs, nil); err != nil {
		return nil, fmt.Errorf("loading index_home: %w", err)
	}
	return h, nil
}

// Home is santa_index_home of key, the bytes of a struct santa_index_key
// (12 bytes, little-endian).
func (h *Hasher) Home(key []byte) (uint32, error) {
	// A test run takes at least an Ethernet header's worth of bytes.
	frame := make([]byte, max(len(key), 14))
	copy(frame, key)
	return h.objs.IndexHome.Run(&ebpf.RunOptions{Data: frame})
}

// Close releases the program.
func (h *Hasher) Close() error { return h.objs.Close() }
