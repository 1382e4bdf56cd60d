// SPDX-License-Identifier: Apache-2.0

package server

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/config"
)

// MaxMetricValues bounds the policy label values one rule adds to the
// metrics from request values (detailed_metric, value_to_metric): the first
// MaxMetricValues distinct names a rule produces are used as they are; every
// later one is counted under one fixed name per rule: its path with
// OtherValue at every level whose value comes from the request, empty
// values included (d.a_(other).b_(other)). So a rule adds at most MaxMetricValues+1 policy
// label values whatever the traffic, and the whole label set is bounded by
// (MaxMetricValues+1) × the rules that use request values, plus one per
// other rule. The set a rule has admitted survives reloads (it is keyed by
// the rule's FullKey), so reloading cannot grow it past the bound either.
const MaxMetricValues = 100

// MaxLabelValueBytes bounds the bytes of each key and value a request puts
// in a policy label (detailed_metric, value_to_metric): a longer one is cut
// there and marked "…(cut from N bytes)" (as the live view cuts values), so
// the label set is bounded in bytes as well as in number.
const MaxLabelValueBytes = 64

// OtherValue stands for request values past a rule's MaxMetricValues, and
// is the domain label of a domain no configuration file defines (which a
// request's descriptor limit override can reach).
const OtherValue = "(other)"

// OverridePolicy is the policy label of a descriptor that carries its own
// limit (Envoy's limit override): its key, values and limit all come from
// the request, so none of them is a label.
const OverridePolicy = "(override)"

// metricNames turns a rule and a request's entries into the policy label,
// holding each rule's budget of label values from requests.
type metricNames struct {
	mu   sync.Mutex
	seen map[string]map[string]struct{} // rule FullKey → names admitted
}

// name is the policy label of a rule's metrics: its name, or its key in the
// tree; with detailed_metric, the request's own keys and values; with
// value_to_metric at some levels, the tree's key with the request's values
// at those levels (a level with share_threshold keeps its wildcard, as its
// values share one quota). Names from request values are bounded by
// MaxMetricValues per rule.
func (m *metricNames) name(r *config.Rule, entries []config.Entry) string {
	detailed := r.DetailedMetric
	toMetric := false
	for _, l := range r.Levels {
		toMetric = toMetric || (l.ValueToMetric && !l.ShareThreshold)
	}
	if !detailed && !toMetric {
		return r.Title()
	}
	fromRequest := func(i int) bool { // level i's value in the name is the request's
		return detailed || (i < len(r.Levels) && r.Levels[i].ValueToMetric && !r.Levels[i].ShareThreshold)
	}
	var b strings.Builder
	b.WriteString(r.Domain)
	for i, e := range entries {
		v := e.Value
		if i < len(r.Path) && !fromRequest(i) {
			v = r.Path[i].Value
		}
		writeLevel(&b, e.Key, v)
	}
	n := b.String()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]map[string]struct{}{}
	}
	set := m.seen[r.FullKey]
	if set == nil {
		set = map[string]struct{}{}
		m.seen[r.FullKey] = set
	}
	if _, ok := set[n]; ok || len(set) < MaxMetricValues {
		set[n] = struct{}{}
		return n
	}
	// Past the budget, one fixed name per rule: the rule's path with
	// OtherValue at every level whose value comes from the request. It
	// owes nothing to the request, not even which of its values are empty
	// (a key-only level matches the empty value too): a name that kept
	// them empty was a label per pattern of empty values, 2^depth of them.
	b.Reset()
	b.WriteString(r.Domain)
	for i, p := range r.Path {
		v := p.Value
		if fromRequest(i) {
			v = OtherValue
		}
		writeLevel(&b, p.Key, v)
	}
	return b.String()
}

// writeLevel writes one level of a policy label: ".key", or ".key_value"
// when value is not empty.
func writeLevel(b *strings.Builder, key, value string) {
	b.WriteByte('.')
	b.WriteString(labelValue(key))
	if value != "" {
		b.WriteByte('_')
		b.WriteString(labelValue(value))
	}
}

// labelValue is a request's key or value as a part of a label: cut at
// MaxLabelValueBytes, and with any bytes that are not UTF-8 (RLS takes
// values as opaque bytes; a label must be UTF-8) as U+FFFD.
func labelValue(s string) string {
	s = cut(s, MaxLabelValueBytes)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}
