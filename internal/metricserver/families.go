package metricserver

import "github.com/prometheus/client_golang/prometheus"

// Family is one metric family and its samples at one moment.
type Family struct {
	Name string
	Type prometheus.ValueType
	Help string
	// Labels name what samples' label values are.
	Labels  []string
	Samples []Sample
}

// Sample is one series' value; Labels are in the order of Family.Labels.
type Sample struct {
	Labels []string
	Value  uint64
}

// One is the one sample of a family without labels.
func One(v uint64) []Sample { return []Sample{{Value: v}} }

// Families collects, at each scrape, the families its function returns:
// for the agents, whose counters are read under their lock at once. It
// describes no metric in advance (an unchecked collector).
type Families func() []Family

func (Families) Describe(chan<- *prometheus.Desc) {}

func (f Families) Collect(ch chan<- prometheus.Metric) {
	for _, m := range f() {
		desc := prometheus.NewDesc(m.Name, m.Help, m.Labels, nil)
		for _, s := range m.Samples {
			ch <- prometheus.MustNewConstMetric(desc, m.Type, float64(s.Value), s.Labels...)
		}
	}
}

// NewFamily is a Family, for tables of them.
func NewFamily(name string, typ prometheus.ValueType, help string, labels []string, samples []Sample) Family {
	return Family{Name: name, Type: typ, Help: help, Labels: labels, Samples: samples}
}

// Labeled is a sample whose label values are labels.
func Labeled(v uint64, labels ...string) Sample { return Sample{Labels: labels, Value: v} }
