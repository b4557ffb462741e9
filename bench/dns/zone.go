package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/santa-offload/santa/internal/pkttest"
)

// The zone every server serves: "example.", with an SOA, one NS and n
// A records n0.example. ... n<n-1>.example.
const zoneName = "example"

// name is the i-th name of the zone, as queried.
func name(i int) string { return fmt.Sprintf("n%d.%s", i, zoneName) }

// query is the query for name(i) with transaction id txid (RD set, A/IN):
// what dnsperf sends too.
func query(txid uint16, i int) []byte { return pkttest.DNSQuery(txid, name(i)) }

// writeZone writes the zone file of n names to path.
func writeZone(path string, n int, serverIP string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "$ORIGIN %s.\n$TTL 3600\n", zoneName)
	fmt.Fprintf(w, "@ IN SOA ns.%[1]s. admin.%[1]s. 1 3600 600 86400 60\n@ IN NS ns.%[1]s.\nns IN A %s\n", zoneName, serverIP)
	for i := range n {
		fmt.Fprintf(w, "n%d IN A 10.%d.%d.%d\n", i, i>>16&255, i>>8&255, i&255)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeDnsperfQueries writes dnsperf's query file: every name, in order.
func writeDnsperfQueries(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, "%s A\n", name(i))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
