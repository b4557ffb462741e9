package daemon

import "runtime/debug"

// Version is santad's version text: the module version and the commit it
// was built from, as the Go toolchain recorded them.
func Version() string {
	v := "santad"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v += " " + bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}
