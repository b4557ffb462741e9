// Package netns runs code inside a network namespace: santactl for an
// operator's namespace, the benchmarks and tests for those of their rigs.
package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Named is the path of a namespace made by `ip netns add name`.
func Named(name string) string { return filepath.Join("/run/netns", name) }

// Run runs f in the network namespace at path (the caller's own for "").
// Sockets and links f creates stay in that namespace whichever thread uses
// them later.
func Run(path string, f func() error) error {
	if path == "" {
		return f()
	}
	ns, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer ns.Close()
	return In(ns, f)
}

// In runs f in the network namespace ns refers to. f runs on a thread of
// its own that never returns to the Go scheduler, so no other goroutine
// ever runs in the namespace.
func In(ns *os.File, f func() error) error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine instead of
		// going back to the pool in another namespace.
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("enter network namespace %s: %w", ns.Name(), err)
			return
		}
		done <- f()
	}()
	return <-done
}

// All opens every network namespace that a task is in (threads may each be
// in their own) or that `ip netns` named, once each. One that only open
// sockets hold is not found. Needs the host's PID namespace to see every
// task. The caller closes them.
func All() ([]*os.File, error) {
	tasks, err := filepath.Glob("/proc/[0-9]*/task/[0-9]*/ns/net")
	if err != nil {
		return nil, err
	}
	named, _ := filepath.Glob(Named("*"))
	paths := append(named, tasks...)
	type nsID struct{ dev, ino uint64 }
	seen := make(map[nsID]bool)
	var all []*os.File
	for _, p := range paths {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil {
			continue // the task ended meanwhile
		}
		id := nsID{st.Dev, st.Ino}
		if seen[id] {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		seen[id] = true
		all = append(all, f)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no network namespace found in /proc")
	}
	return all, nil
}
