package protocol

import (
	"fmt"
	"strconv"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// NoIndex is the index of an error that is not about one item of a batch.
const NoIndex = 0xffffffff

// MaxErrorMessage is the longest message an ERROR body may carry.
const MaxErrorMessage = 1024

// Error is both the body of an ERROR reply and the error Decode and Encode
// return, so that what a server fails to decode can be sent back as is.
type Error struct {
	Code    syscall.Errno // a Linux errno, from the table of docs/protocol.md
	Index   uint32        // the offending item of a batch, or NoIndex
	Message string        // for people; Errorf keeps it within MaxErrorMessage
}

// Errorf is an error about no item in particular.
func Errorf(code syscall.Errno, format string, args ...any) *Error {
	return ErrorAt(code, NoIndex, format, args...)
}

// ErrorAt is an error about item index of a batch (ADD_RULES' rules, say).
func ErrorAt(code syscall.Errno, index uint32, format string, args ...any) *Error {
	return &Error{Code: code, Index: index, Message: truncate(fmt.Sprintf(format, args...), MaxErrorMessage)}
}

func (e *Error) Error() string {
	s := e.Code.Error()
	if e.Index != NoIndex {
		s += " (item " + strconv.FormatUint(uint64(e.Index), 10) + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap gives the errno, so that errors.Is(err, syscall.ENOENT) works.
func (e *Error) Unwrap() error { return e.Code }

// errnoNames are the names of docs/protocol.md's error table. Linux gives
// 95 two names; the protocol calls it EOPNOTSUPP, as its table does.
var errnoNames = map[syscall.Errno]string{
	syscall.EPERM:           "EPERM",
	syscall.ENOENT:          "ENOENT",
	syscall.EIO:             "EIO",
	syscall.EBADF:           "EBADF",
	syscall.EEXIST:          "EEXIST",
	syscall.EINVAL:          "EINVAL",
	syscall.ENOSPC:          "ENOSPC",
	syscall.EPROTO:          "EPROTO",
	syscall.EBADMSG:         "EBADMSG",
	syscall.ENOTSOCK:        "ENOTSOCK",
	syscall.EMSGSIZE:        "EMSGSIZE",
	syscall.EPROTONOSUPPORT: "EPROTONOSUPPORT",
	syscall.EOPNOTSUPP:      "EOPNOTSUPP",
	syscall.ESTALE:          "ESTALE",
	syscall.EDQUOT:          "EDQUOT",
}

// ErrnoName is code's name as docs/protocol.md writes it ("EOPNOTSUPP"),
// the kernel's for a code the table does not hold, or "errno N".
func ErrnoName(code syscall.Errno) string {
	if name, ok := errnoNames[code]; ok {
		return name
	}
	if name := unix.ErrnoName(code); name != "" {
		return name
	}
	return "errno " + strconv.Itoa(int(code))
}

// truncate cuts s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
