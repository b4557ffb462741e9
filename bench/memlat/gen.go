// Command memlat measures what one dependent random access to a BPF array
// costs on this machine, for a few layouts of the lines read: packed into
// a small area, one per 4-KiB page, and spread over a large array. The
// difference between the first two is the cost of address translation
// alone (the lines are the same number and fit the cache either way); it
// sets the floor of what a data plane pays per rule it reads at a million
// rules (docs/benchmarks.md, "Reading ahead").
//
//	go run ./bench/memlat [-rounds 5] [-repeat 200]
package main

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type memlat_line memlat ../bpf/memlat.bpf.c -- -I../../bpf/include
