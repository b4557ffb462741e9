package daemon

import (
	"testing"
)

// After a restart, santad reports the XDP mode of the link it took over:
// lo's generic one, which kept answering, not none.
func TestRestartReportsXDPMode(t *testing.T) {
	e := newEnv(t, "r", "")
	for _, when := range []string{"at start", "after a restart"} {
		st, err := e.client(t).Status()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Interfaces) != 1 || st.Interfaces[0].Name != "lo" || st.Interfaces[0].XDP != "generic" || !st.Interfaces[0].TC {
			t.Errorf("%s, STATUS gives interfaces %+v; want lo with generic XDP and TC", when, st.Interfaces)
		}
		if err := e.d.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := e.d.Start(); err != nil {
			t.Fatal(err)
		}
	}
}
