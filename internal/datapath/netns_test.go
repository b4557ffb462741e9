package datapath

import (
	osexec "os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// enterNewNetns moves the calling goroutine's thread into a new network
// namespace; the returned function moves it back. The thread stays locked
// until then, and is discarded afterwards (it is never unlocked).
func enterNewNetns(t testing.TB) func() {
	t.Helper()
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		unix.Close(orig)
		t.Fatalf("unsharing the network namespace: %v", err)
	}
	return func() {
		unix.Setns(orig, unix.CLONE_NEWNET)
		unix.Close(orig)
	}
}

// exec runs a command in the calling thread's network namespace.
func exec(name string, args ...string) error {
	return osexec.Command(name, args...).Run()
}
