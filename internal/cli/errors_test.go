package cli

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

func TestRefused(t *testing.T) {
	rule := func(i int) string { return fmt.Sprintf("rule %d", i+10) }
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("add rules to service 7: %w", protocol.ErrorAt(syscall.EINVAL, 3, "condition pattern is 300 bytes; the limit is 256")),
			"rule 13: condition pattern is 300 bytes; the limit is 256 (EINVAL)"},
		{protocol.Errorf(syscall.ENOENT, "no service 9"), "no service 9 (ENOENT)"},
		{protocol.Errorf(syscall.EDQUOT, ""), "disk quota exceeded (EDQUOT)"},
		{&protocol.Error{Code: 4095, Index: protocol.NoIndex, Message: "what"}, "what (errno 4095)"},
		{errors.New("dial santad: no such file"), "dial santad: no such file"},
	}
	for _, tt := range tests {
		err := refused(tt.err, rule)
		if err.Error() != tt.want {
			t.Errorf("refused(%v) says %q, want %q", tt.err, err, tt.want)
		}
		var in, out *protocol.Error
		if errors.As(tt.err, &in) && (!errors.As(err, &out) || out != in) {
			t.Errorf("refused(%v) hides the daemon's error", tt.err)
		}
	}
}
