package daemon

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// A journal damaged between two runs: santad refuses to start, says where
// and what to do, and leaves the file as it is, while the earlier data plane
// answers every rule. Mended as the error says, the journal gives back the
// records before the damage, and the damaged file is kept.
func TestDamagedJournal(t *testing.T) {
	e := newEnv(t, "j", "")
	c, appSock, svc := e.attachedUDP(t)
	s := svc.ServiceID
	// After the attach record, five batch records of three rules each.
	var ids []uint32
	added := dnsRules(t, 0, 15, 64)
	for i := 0; i < len(added); i += 3 {
		got, err := c.AddRules(s, added[i:i+3])
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	if err := e.d.Stop(); err != nil {
		t.Fatal(err)
	}

	// A byte of the third-from-last record's payload: the third batch.
	path := filepath.Join(e.d.StateDir, "journal")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	starts := recordStarts(data)
	if len(starts) != 6 {
		t.Fatalf("the journal holds %d records, want an attach and five batches", len(starts))
	}
	bad := starts[3]
	data[bad+8+10] ^= 0x01
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Start(); err == nil {
		t.Fatal("santad started on a damaged journal")
	}
	log := e.d.Log()
	for _, want := range []string{
		`level=ERROR msg="refusing to start: the journal is damaged; a data plane left pinned keeps answering" path=` + path +
			fmt.Sprintf(" offset=%d size=%d good_records=3", bad, len(data)),
		fmt.Sprintf("santad: journal %s is damaged at byte %d of %d, after 3 good records: its CRC-32C does not match.", path, bad, len(data)),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("santad's log does not say\n%s", want)
		}
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Error("santad changed the damaged journal")
	}
	q := e.dialUDP(t, portOf(appSock))
	for i := range added {
		if got, err := santadtest.Ask(q, pkttest.DNSQuery(0, pkttest.Name(i)), time.Second); err != nil || !bytes.Equal(got, dnsReply(t, i, 64)) {
			t.Errorf("while santad refuses to start, rule %d gets %x, %v", i, got, err)
		}
	}

	// The error's own commands keep the damaged file and cut the journal
	// before the damage.
	_, advice, _ := strings.Cut(log, "before the damage, keeping it: ")
	advice, _, _ = strings.Cut(advice, ";")
	if out, err := exec.Command("sh", "-c", advice).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", advice, err, out)
	}
	if err := e.d.Start(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.d.Log(), "msg=restored services=1 rules=6 ") {
		t.Error("santad's log does not say it restored the 6 rules before the damage")
	}
	want := map[uint32]rule.Rule{}
	for i, id := range ids[:6] {
		want[id] = added[i]
	}
	checkState(t, e.client(t), s, want)
	if got, err := santadtest.Ask(q, pkttest.DNSQuery(0, pkttest.Name(14)), 200*time.Millisecond); err == nil {
		t.Errorf("a rule after the damage is answered: %x", got)
	}
	if kept, _ := os.ReadFile(path + ".corrupt"); !bytes.Equal(kept, data) {
		t.Errorf("the damaged journal was not kept byte for byte: %d bytes, were %d", len(kept), len(data))
	}
}

// recordStarts is where each record of a journal starts: after the 8-byte
// header, each is a u32 payload length, a u32 CRC and the payload.
func recordStarts(journal []byte) []int {
	var starts []int
	for at := 8; at+8 <= len(journal); at += 8 + int(binary.LittleEndian.Uint32(journal[at:])) {
		starts = append(starts, at)
	}
	return starts
}
