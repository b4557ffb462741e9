package procsock

import (
	"os"
	"testing"
)

func TestUserOf(t *testing.T) {
	u, err := UserOf(os.Getpid())
	if err != nil || u[0] != uint32(os.Getuid()) || u[1] != uint32(os.Geteuid()) {
		t.Fatalf("UserOf(self) = %v, %v; want real uid %d, effective %d", u, err, os.Getuid(), os.Geteuid())
	}
	for status, want := range map[string]User{
		"Name:\tnamed\nUid:\t101\t101\t101\t101\nGid:\t0\t0\t0\t0\n": {101, 101, 101, 101},
		"Uid:\t1000\t0\t0\t0\n": {1000, 0, 0, 0},
	} {
		if got, err := parseUid([]byte(status)); err != nil || got != want {
			t.Errorf("parseUid(%q) = %v, %v; want %v", status, got, err, want)
		}
	}
	for _, bad := range []string{"Name:\tx\n", "Uid:\t1\t2\t3\n", "Uid:\t1\t2\t3\tx\n"} {
		if _, err := parseUid([]byte(bad)); err == nil {
			t.Errorf("parseUid(%q) accepted", bad)
		}
	}
	if got := (User{7, 7, 7, 7}).String(); got != "uid 7" {
		t.Errorf("String = %q", got)
	}
}
