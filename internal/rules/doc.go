// Package rules turns a service's rules (package rule) into the index the
// Santa data plane walks: hashed regions, index keys and nodes, and the
// incremental ServiceIndex that changes them. It also holds a pure-Go
// reference matcher that tests use as the oracle for the kernel. The layout
// it produces is the one bpf/include/santa_abi.h defines.
package rules
