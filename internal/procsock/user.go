package procsock

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// User is whom a process runs as: its real, effective, saved and
// filesystem user ids (the Uid line of /proc/PID/status), as seen from
// the reader's user namespace. All four are compared, not just one: a
// user cannot give a process another's ids without that user's help (a
// set-user-id program keeps its caller's real uid), so a process of some
// User is under the control of that user or of root.
type User [4]uint32

// String is "uid 1000", or, for a process whose ids differ, each of them.
func (u User) String() string {
	if u[0] == u[1] && u[0] == u[2] && u[0] == u[3] {
		return fmt.Sprintf("uid %d", u[0])
	}
	return fmt.Sprintf("uids %d/%d/%d/%d (real/effective/saved/fs)", u[0], u[1], u[2], u[3])
}

// UserOf is whom process pid runs as.
func UserOf(pid int) (User, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return User{}, err
	}
	u, err := parseUid(b)
	if err != nil {
		return User{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return u, nil
}

// parseUid reads the Uid line of a /proc/PID/status: "Uid:\t0\t0\t0\t0".
func parseUid(status []byte) (User, error) {
	lines := bufio.NewScanner(bytes.NewReader(status))
	for lines.Scan() {
		ids, ok := strings.CutPrefix(lines.Text(), "Uid:")
		if !ok {
			continue
		}
		var u User
		f := strings.Fields(ids)
		if len(f) != len(u) {
			return User{}, fmt.Errorf("Uid line %q", lines.Text())
		}
		for i := range u {
			id, err := strconv.ParseUint(f[i], 10, 32)
			if err != nil {
				return User{}, fmt.Errorf("Uid line %q: %w", lines.Text(), err)
			}
			u[i] = uint32(id)
		}
		return u, nil
	}
	return User{}, fmt.Errorf("no Uid line")
}
