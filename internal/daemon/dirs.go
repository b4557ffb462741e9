package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The socket's directory and the state directory are often siblings under
// one parent santad creates (/run/santa/santa.sock, /run/santa/state), and
// whichever santad creates first makes that parent. So every directory
// santad creates on the way is 0755, as the socket's must be for its group
// to reach it; only the state directory itself is private.
const (
	publicDirMode = 0o755
	stateDirMode  = 0o700
)

// mkdirs creates dir, with mode perm, and the directories missing on the
// way to it, with publicDirMode; whatever the umask. Directories that exist
// are the operator's and left as they are (openStateDir and checkSocketDir
// then refuse those others may write).
func mkdirs(dir string, perm os.FileMode) error {
	if parent := filepath.Dir(dir); parent != dir {
		if _, err := os.Stat(parent); errors.Is(err, os.ErrNotExist) {
			if err := mkdirs(parent, publicDirMode); err != nil {
				return err
			}
		}
	}
	if err := os.Mkdir(dir, perm); errors.Is(err, os.ErrExist) {
		return nil
	} else if err != nil {
		return err
	}
	if err := os.Chmod(dir, perm); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", dir, err)
	}
	return nil
}

// ownDir checks the directory st describes, at path, for what santad keeps
// there (what, e.g. "state directory"): it must be root's or santad's own,
// and nobody else may write it, or whoever may could put files of their
// choosing there (a journal santad restores at start) or swap santad's
// files for symbolic links. sticky allows a sticky directory others may
// write (/tmp), in which they cannot rename or remove santad's files: the
// socket's directory, where santad creates its socket afresh, but not the
// state directory, where santad reads what it finds. why says what
// another user could do there; fix how to set a directory up instead.
func ownDir(path string, st *unix.Stat_t, what, why, fix string, sticky bool) error {
	euid := uint32(os.Geteuid())
	mode := st.Mode & 0o7777
	ownerOK := st.Uid == 0 || st.Uid == euid
	writable := mode&0o022 != 0 && !(sticky && mode&unix.S_ISVTX != 0)
	if ownerOK && !writable {
		return nil
	}
	var problems []string
	switch {
	case !ownerOK && euid == 0:
		problems = append(problems, "it is not root's")
	case !ownerOK:
		problems = append(problems, fmt.Sprintf("it is neither root's nor santad's (uid %d)", euid))
	}
	if writable {
		problems = append(problems, "others than its owner may write it")
	}
	problem := strings.Join(problems, ", and ")
	return fmt.Errorf("refusing the %s %s: it is owned by %s, group %s, mode %04o; %s. %s: %s",
		what, path, userName(st.Uid), groupName(st.Gid), mode, problem, why, fix)
}

// userName is a uid with its name, if it has one: "uid 65534 (nobody)".
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return fmt.Sprintf("uid %s (%s)", id, u.Username)
	}
	return "uid " + id
}

// groupName is a gid with its name, if it has one.
func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return fmt.Sprintf("%s (%s)", id, g.Name)
	}
	return id
}

// openStateDir creates the state directory dir if it is missing, opens it
// and checks it (ownDir): santad restores every service and rule of the
// journal it finds there. Files in it are opened through the descriptor,
// in the directory checked.
func openStateDir(dir string) (*os.File, error) {
	if err := mkdirs(dir, stateDirMode); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening state directory: %w", &os.PathError{Op: "open", Path: dir, Err: err})
	}
	d := os.NewFile(uintptr(fd), dir)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		d.Close()
		return nil, fmt.Errorf("reading state directory %s: %w", dir, err)
	}
	owner := dirOwner(uint32(os.Geteuid()))
	if err := ownDir(dir, &st, "state directory", "santad restores the services and rules of the journal it finds "+
		"there, and another user could put one there",
		fmt.Sprintf("remove it and let santad create it (mode %04o), or make it %s's and writable by %s alone "+
			"(chown %s: %s; chmod %04o %s), or set state_dir to a path under directories only root may write (the default is %s)",
			stateDirMode, owner, owner, owner, dir, stateDirMode, dir, DefaultConfig().StateDir), false); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// checkSocketDir checks the directory santad creates its socket in
// (ownDir), after creating it if it is missing: santad sets the socket's
// group and mode by its name, and another user who may write the
// directory could put a symbolic link there in its place.
func checkSocketDir(dir string) error {
	if err := mkdirs(dir, publicDirMode); err != nil {
		return fmt.Errorf("creating socket directory: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("reading socket directory: %w", &os.PathError{Op: "stat", Path: dir, Err: err})
	}
	owner := dirOwner(uint32(os.Geteuid()))
	return ownDir(dir, &st, "socket's directory", "santad creates its socket there and sets its group and mode, "+
		"and another user could swap the socket for a symbolic link to a file of theirs, or of root's, "+
		"to have its group and mode set instead",
		fmt.Sprintf("make it %s's and writable by %s alone (chown %s: %s; chmod go-w %s), "+
			"or put the socket in a directory santad creates, such as a new subdirectory of this one",
			owner, owner, owner, dir, dir), true)
}

// dirOwner is who the advice of ownDir's errors says should own santad's
// directories, as chown takes it: root, or the user santad runs as (euid),
// who must be able to write them.
func dirOwner(euid uint32) string {
	if euid == 0 {
		return "root"
	}
	id := strconv.FormatUint(uint64(euid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return id
}
