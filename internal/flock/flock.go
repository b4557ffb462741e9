// Package flock takes the exclusive locks that keep two santads off one
// state directory or one pin path (flock(2)), and names the process that
// holds one.
package flock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// HeldError is Lock's error when another open file holds the lock.
type HeldError struct {
	Path string
	PID  int // the holder, as /proc/locks names it; 0 if unknown
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is locked by %s", e.Path, e.Holder("another process"))
}

// Holder names the holder for a message: "process PID, WHAT", or what
// alone if its pid is unknown.
func (e *HeldError) Holder(what string) string {
	if e.PID == 0 {
		return what
	}
	return fmt.Sprintf("process %d, %s", e.PID, what)
}

// Lock takes an exclusive lock on f, a file or a directory, without
// waiting; closing f releases it. If another open file holds the lock, the
// error is a *HeldError.
func Lock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return &HeldError{Path: f.Name(), PID: holder(f)}
	}
	if err != nil {
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return nil
}

// holder is the pid /proc/locks gives for the flock lock on f's inode, or
// 0. Its lines read "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF",
// the device's major and minor in hex; a waiter's has "->" after the
// number.
func holder(f *os.File) int {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0
	}
	inode := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(locks)) {
		fields := strings.Fields(line)
		if len(fields) >= 6 && fields[1] == "FLOCK" && fields[5] == inode {
			if pid, err := strconv.Atoi(fields[4]); err == nil {
				return pid
			}
		}
	}
	return 0
}
