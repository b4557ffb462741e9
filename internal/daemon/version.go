package daemon

import "github.com/santa-offload/santa/internal/version"

// Version is santad's version text, as --version prints it: what STATUS
// and the log's "ready" line say.
func Version() string { return version.String("santad") }
