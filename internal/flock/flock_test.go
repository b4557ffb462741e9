package flock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A second lock on a file or a directory is refused with the holder's pid,
// whether the holder is this process (another open file) or another one;
// closing the holder's file releases it.
func TestLockNamesHolder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lock")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{file, dir} {
		first, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := Lock(first); err != nil {
			t.Fatal(err)
		}
		second, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var held *HeldError
		if err := Lock(second); !errors.As(err, &held) || held.PID != os.Getpid() || held.Path != path {
			t.Errorf("second lock of %s: %v; want it held by pid %d", path, err, os.Getpid())
		}
		first.Close()
		if err := Lock(second); err != nil {
			t.Errorf("lock of %s once the first file is closed: %v", path, err)
		}
		second.Close()
	}

	// Held by another process: flock(1) holding the directory.
	cmd := exec.Command("flock", "-x", dir, "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var held *HeldError
		err := Lock(f)
		if err == nil {
			f.Close() // flock(1) not there yet: let it take the lock
			if f, err = os.Open(dir); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.As(err, &held) || held.PID != cmd.Process.Pid {
			t.Fatalf("lock held by flock(1), pid %d: %v", cmd.Process.Pid, err)
		}
		if want := dir + " is locked by process " + strconv.Itoa(cmd.Process.Pid) + ", another process"; err.Error() != want {
			t.Errorf("error %q; want %q", err, want)
		}
		return
	}
	t.Fatal("flock(1) did not take the lock in 5 s")
}
