package dnsload

import (
	"bufio"
	"fmt"
	"io"
)

// typeNames are the query types' names in a dnsperf query file.
var typeNames = map[uint16]string{TypeA: "A", TypeSOA: "SOA", TypeTXT: "TXT"}

// WriteDnsperfQueries writes a dnsperf query file ("name type" lines):
// the questions in the order seq gives, seq[k] indexing questions. dnsperf
// sends the lines in order and starts over at the end, so a popularity is
// a sequence of draws: popularity.Popularity{Zipf: true, S: 1}.Sequence(
// len(questions), lines, seed) repeats each question in proportion to its
// Zipf weight, questions[0] the most popular; a sequence of 0..n-1 asks
// for every question in turn.
//
// dnsperf (2.10) sends RD and no EDNS (Shape RD); -e adds an OPT record for
// 4096 bytes without options (Shape EDNS), -D one with the DO bit (Shape
// EDNSDO). It cannot send the other shapes.
func WriteDnsperfQueries(w io.Writer, questions []Question, seq []uint32) error {
	bw := bufio.NewWriter(w)
	for _, k := range seq {
		if int(k) >= len(questions) {
			return fmt.Errorf("dnsperf queries: question %d of %d", k, len(questions))
		}
		q := questions[k]
		typ, ok := typeNames[q.Type]
		if !ok {
			typ = fmt.Sprintf("TYPE%d", q.Type)
		}
		fmt.Fprintf(bw, "%s %s\n", q.Name, typ)
	}
	return bw.Flush()
}
