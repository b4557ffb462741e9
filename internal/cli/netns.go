package cli

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetns runs f in the network namespace at path (this one for ""). f
// runs on a thread of its own that never returns to the Go scheduler, so
// no other goroutine ever runs in the namespace.
func inNetns(path string, f func() error) error {
	if path == "" {
		return f()
	}
	ns, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer ns.Close()
	done := make(chan error)
	go func() {
		// Never unlocked: the thread ends with the goroutine instead of
		// going back to the pool in another namespace.
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		done <- f()
	}()
	return <-done
}
