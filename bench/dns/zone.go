package main

import (
	"github.com/santa-offload/santa/internal/dnstest"
	"github.com/santa-offload/santa/internal/pkttest"
)

// query is the query for dnstest.Name(i) with transaction id txid (RD set,
// A/IN): what dnsperf sends too.
func query(txid uint16, i int) []byte { return pkttest.DNSQuery(txid, dnstest.Name(i)) }
