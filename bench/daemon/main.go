// Command daemon measures santad end to end through the Go client, with a
// real santad serving lo in a network namespace of its own (built from
// cmd/santad; needs root, run from inside the module):
//
//	go run ./bench/daemon [-rules 1000000] [-updates 200]
//
// (a) install: -rules DNS rules with 64-byte replies sent in one
// transaction and committed, from BEGIN to the COMMIT reply; (b) update
// visibility: the time from sending REPLACE_RULES for one rule (of the
// installed set) to the first reply of the kernel carrying the new bytes,
// seen by a UDP client that asks again and again meanwhile. It prints
// RESULT lines on stdout, progress on stderr.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

func main() {
	n := flag.Int("rules", 1000000, "rules to install in one transaction")
	updates := flag.Int("updates", 200, "single-rule replacements to time")
	chunk := flag.Int("chunk", 900, "rules per ADD_RULES message")
	flag.Parse()
	if err := run(*n, *updates, *chunk); err != nil {
		fmt.Fprintf(os.Stderr, "daemon bench: %v\n", err)
		os.Exit(1)
	}
}

func run(n, updates, chunk int) error {
	santadtest.SweepStale()
	dir, err := os.MkdirTemp("", "santa-daemon-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := santadtest.Build(dir)
	if err != nil {
		return err
	}
	ns, err := santadtest.NewNetns(santadtest.NetnsName("bench"))
	if err != nil {
		return err
	}
	defer ns.Delete()
	d := santadtest.New(bin, ns, dir, santadtest.PinPath("bench"))
	defer d.Close()
	if err := d.Start(); err != nil {
		return err
	}
	c, err := client.Dial(d.Socket)
	if err != nil {
		return err
	}
	defer c.Close()
	var app, q *net.UDPConn
	err = ns.Do(func() (err error) {
		if app, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			return err
		}
		q, err = net.DialUDP("udp4", nil, app.LocalAddr().(*net.UDPAddr))
		return err
	})
	if err != nil {
		return err
	}
	defer app.Close()
	defer q.Close()
	svc, err := c.Attach(app)
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "generating %d DNS rules\n", n)
	rs := make([]rule.Rule, n)
	for i := range rs {
		if rs[i], err = pkttest.SizedDNSRule(pkttest.Name(i), 64); err != nil {
			return err
		}
	}
	ids, err := install(c, svc.ServiceID, rs, chunk)
	if err != nil {
		return err
	}
	last := n - 1
	reply, err := pkttest.SizedDNSReply(pkttest.Name(last), 64)
	if err != nil {
		return err
	}
	if got, err := santadtest.Ask(q, pkttest.DNSQuery(0, pkttest.Name(last)), time.Second); err != nil || !bytes.Equal(got, reply) {
		return fmt.Errorf("the last rule installed is not answered: %x, %v", got, err)
	}

	return visibility(c, svc.ServiceID, q, ids[n/2], rs[n/2], pkttest.Name(n/2), updates)
}

// install sends rs in one transaction, chunk rules per message.
func install(c *client.Client, svc uint32, rs []rule.Rule, chunk int) ([]uint32, error) {
	start := time.Now()
	txn, err := c.Begin(svc)
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for part := range slices.Chunk(rs, chunk) {
		got, err := txn.AddRules(part)
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	streamed := time.Now()
	if added, err := txn.Commit(); err != nil || added != len(rs) {
		return nil, fmt.Errorf("commit: %d of %d rules added: %v", added, len(rs), err)
	}
	done := time.Now()
	n := len(rs)
	fmt.Fprintf(os.Stderr, "installed %d rules: streamed in %v, committed in %v\n", n, streamed.Sub(start), done.Sub(streamed))
	result(fmt.Sprintf("daemon/install_txn/rules=%d", n), done.Sub(start).Seconds(), "s")
	result(fmt.Sprintf("daemon/install_txn_stream/rules=%d", n), streamed.Sub(start).Seconds(), "s")
	result(fmt.Sprintf("daemon/install_txn_commit/rules=%d", n), done.Sub(streamed).Seconds(), "s")
	result(fmt.Sprintf("daemon/install_txn_rate/rules=%d", n), float64(n)/done.Sub(start).Seconds(), "rules/s")
	return ids, nil
}

// visibility replaces rule id (r, answering name) again and again with a
// new reply, its last four bytes a counter, and times each replacement to
// the first kernel reply that carries it.
func visibility(c *client.Client, svc uint32, q *net.UDPConn, id uint32, r rule.Rule, name string, updates int) error {
	query := pkttest.DNSQuery(0, name)
	var visible, acked []time.Duration
	for i := range updates {
		next := withTail(r, uint32(i+1))
		seen := make(chan time.Time, 1)
		stop := make(chan struct{})
		go poll(q, query, uint32(i+1), seen, stop)
		start := time.Now()
		err := c.ReplaceRules(svc, []client.RuleEntry{{RuleID: id, Rule: next}})
		ack := time.Now()
		if err != nil {
			close(stop)
			return err
		}
		select {
		case at := <-seen:
			visible = append(visible, at.Sub(start))
			acked = append(acked, ack.Sub(start))
		case <-time.After(2 * time.Second):
			close(stop)
			return fmt.Errorf("update %d not answered within 2 s", i)
		}
		close(stop)
	}
	slices.Sort(visible)
	slices.Sort(acked)
	fmt.Fprintf(os.Stderr, "update visibility over %d updates: median %v, p99 %v, max %v (reply to REPLACE_RULES: median %v)\n",
		len(visible), pct(visible, 50), pct(visible, 99), visible[len(visible)-1], pct(acked, 50))
	result("daemon/update_visible/median", us(pct(visible, 50)), "us")
	result("daemon/update_visible/p99", us(pct(visible, 99)), "us")
	result("daemon/update_ack/median", us(pct(acked, 50)), "us")
	return nil
}

// poll asks until a reply ends in want, and says when it came.
func poll(q *net.UDPConn, query []byte, want uint32, seen chan<- time.Time, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		got, err := santadtest.Ask(q, query, 50*time.Millisecond)
		if err == nil && len(got) >= 4 && binary.BigEndian.Uint32(got[len(got)-4:]) == want {
			seen <- time.Now()
			return
		}
	}
}

// withTail is r with the last four reply bytes set to v.
func withTail(r rule.Rule, v uint32) rule.Rule {
	out := r
	out.Processors = slices.Clone(r.Processors)
	for i, p := range out.Processors {
		if p.Kind == rule.ProcessorPut && int(p.DstOffset)+len(p.Bytes) == int(r.ReplyLen) {
			b := slices.Clone(p.Bytes)
			binary.BigEndian.PutUint32(b[len(b)-4:], v)
			out.Processors[i].Bytes = b
		}
	}
	return out
}

func pct(sorted []time.Duration, p int) time.Duration { return sorted[(len(sorted)-1)*p/100] }

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func result(name string, v float64, unit string) {
	fmt.Printf("RESULT name=%s value=%.3f unit=%s\n", name, v, unit)
}
