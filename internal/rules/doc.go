// Package rules turns a server application's rules into what the Santa data
// plane stores: validated limits, a resolved reply template with copy pieces
// and its checksum, hashed regions and the index the kernel walks. It also
// holds a pure-Go reference matcher that tests use as the oracle for the
// kernel. The layout it produces is the one bpf/include/santa_abi.h defines.
package rules
