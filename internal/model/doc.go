// Package model holds the plain types that santad, its journal and the data
// path share: service and rule ids, a batch of rule changes, what the kernel
// says about a socket, counters, what attaching and handing over did, the
// errors callers tell apart, the default paths and capacities, and Santa's
// socket option. It imports no kernel library (the data path,
// internal/datapath, is the one package that imports cilium/ebpf), so that
// everything else builds, vets and runs its unit tests without the
// generated BPF objects.
//
// These types are santad's own, not an application's: applications use the
// public packages client and rule.
package model
