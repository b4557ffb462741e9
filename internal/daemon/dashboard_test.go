package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// dashboardPath is the Grafana dashboard deploy/ ships.
const dashboardPath = "../../deploy/grafana/santa.json"

// panel is what the test reads of a Grafana panel: rows hold theirs when
// collapsed.
type panel struct {
	Title   string
	Type    string
	Targets []struct{ Expr string }
	Panels  []panel
}

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	Title      string
	UID        string
	Panels     []panel
	Templating struct {
		List []struct {
			Name, Type string
			Query      json.RawMessage // a string, or an object with a query
		}
	}
}

// labelValues is a template variable's query: label_values(EXPR, LABEL).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// queries are every PromQL expression of d, by where it is.
func (d dashboard) queries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for i, tg := range p.Targets {
				out[fmt.Sprintf("panel %q, target %d", p.Title, i)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct{ Query string }
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("variable %s: query %s", v.Name, v.Query)
			}
			q = obj.Query
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(EXPR, LABEL)", v.Name, q)
			continue
		}
		out["variable "+v.Name] = m[1]
	}
	return out
}

// The dashboard's every query, panels and variables, names only metrics
// santad exports, as a scrape of a server with a service, rules, a
// memcached domain and a refusal shows them.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: title %q, uid %q, %d panels", dashboardPath, d.Title, d.UID, len(d.Panels))
	}

	s := newTestServer(t, nil)
	s.setInterfaces([]protocol.Interface{{Ifindex: 1, Name: "lo", XDP: "generic", TC: true}})
	a := s.connectV2(t, alice)
	a.ok(&protocol.AddRules{ServiceID: a.attach(), Rules: []rule.Rule{testRule("ping", 4)}})
	memcachedDomain(a)
	a.refused(&protocol.Detach{ServiceID: 999}, syscall.ENOENT, "no service 999")
	exported := map[string]bool{}
	for _, line := range strings.Split(s.scrape(t), "\n") {
		if name, _, _ := strings.Cut(line, " "); name != "" && line[0] != '#' {
			name, _, _ = strings.Cut(name, "{")
			exported[name] = true
		}
	}

	queries := d.queries(t)
	for where, expr := range queries {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
		}
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: %q: santad exports no %s", where, expr, n)
			}
		}
	}
	t.Logf("%d queries checked against %d exported series names", len(queries), len(exported))
}

// PromQL words that are not metric names: keywords, aggregation
// operators (sum by (path) (...): no "(" follows sum), and the modifiers
// whose parenthesized list holds label names (by (path) names no metric).
var (
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"inf": true, "nan": true, "atan2": true, "sum": true, "min": true, "max": true, "avg": true, "group": true,
		"stddev": true, "stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
		"quantile": true, "limitk": true, "limit_ratio": true}
	promqlLabelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true}
)

// metricNames are the metric names a PromQL expression selects: an
// identifier that is no keyword, no function (followed by "("), no label
// (inside {} or a by/on list), no duration (inside [] or after a
// number), no string and no Grafana variable ($x, ${x}). It checks that
// brackets and strings are closed, and that is all it parses.
func metricNames(expr string) ([]string, error) {
	var names []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipGroup(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '(' || c == ')':
			i++ // balanced: checked by skipGroup's caller below
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unopened %q at %d", c, i)
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				end := strings.IndexByte(expr[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unclosed ${ at %d", i)
				}
				i += end + 1
			}
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.' ||
				(expr[i] == '-' || expr[i] == '+') && (expr[i-1] == 'e' || expr[i-1] == 'E')) {
				i++
			}
		case isIdent(c):
			start := i
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := i
			for next < len(expr) && expr[next] == ' ' {
				next++
			}
			called := next < len(expr) && expr[next] == '('
			switch {
			case promqlLabelLists[strings.ToLower(word)] && called:
				end, err := skipGroup(expr, next)
				if err != nil {
					return nil, err
				}
				i = end
			case called, promqlKeywords[strings.ToLower(word)], promqlLabelLists[strings.ToLower(word)]:
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	if strings.Count(expr, "(") != strings.Count(expr, ")") {
		return nil, fmt.Errorf("unbalanced parentheses")
	}
	return names, nil
}

func isIdent(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// skipString is the index after the string literal that starts at i.
func skipString(expr string, i int) (int, error) {
	quote := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && quote != '`':
			j++
		case expr[j] == quote:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at %d", i)
}

// skipGroup is the index after the bracket that closes the one at i,
// strings inside skipped.
func skipGroup(expr string, i int) (int, error) {
	closer := map[byte]byte{'{': '}', '[': ']', '(': ')'}[expr[i]]
	for j := i + 1; j < len(expr); j++ {
		switch c := expr[j]; {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case c == closer:
			return j + 1, nil
		case c == '{' || c == '[' || c == '(':
			end, err := skipGroup(expr, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		}
	}
	return 0, fmt.Errorf("unclosed %q at %d", expr[i], i)
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`santa_rules`, []string{"santa_rules"}},
		{`sum by (path) (rate(santa_path_packets_total{instance=~"$instance",path=~"tcp_.*"}[$__rate_interval]))`, []string{"santa_path_packets_total"}},
		{`sum(rate(a_total[5m] offset 1h)) / on (service) group_left(manager) b > bool 0.5e-3`, []string{"a_total", "b"}},
		{`histogram_quantile(0.99, sum without (le) (rate(x_bucket{le!="+Inf"}[${__range}])))`, []string{"x_bucket"}},
		{`label_replace(up, "by", "$1", "job", "(.*)") or vector(1)`, []string{"up"}},
		{`topk(5, max_over_time(m[1h:5m]))`, []string{"m"}},
		{`1 + 2`, nil},
	} {
		got, err := metricNames(tc.expr)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`sum(x`, `x{a="b"`, `x{a="b}`, `rate(x[5m)`, `x}`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q) = %q, no error", bad, got)
		}
	}
}
