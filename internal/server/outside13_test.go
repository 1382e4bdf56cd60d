// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// TestOutside13DetailedMetricOtherLabels: MaxMetricValues promises that a
// rule adds at most MaxMetricValues+1 policy label values "whatever the
// traffic" (metricnames.go:14-21; README: "at most 100 label values per
// rule from requests, the rest counted as (other)"). But the (other) name
// keeps a level's empty value empty: a key-only level matches any value,
// the empty one included, so past the budget each pattern of empty and
// non-empty values is a label of its own: 2^depth of them for a
// detailed_metric rule of depth depth (MaxDepth is 64).
func TestOutside13DetailedMetricOtherLabels(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": `domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        descriptors:
          - key: c
            detailed_metric: true
            rate_limit: {unit: minute, requests_per_unit: 1000000}
`})
	for i := range MaxMetricValues {
		h.should(t, "d", desc("a", fmt.Sprintf("x%d", i), "b", "y", "c", "z"))
	}
	for mask := range 8 {
		v := func(bit int) string {
			if mask&(1<<bit) != 0 {
				return fmt.Sprintf("late%d", mask)
			}
			return ""
		}
		if r := h.should(t, "d", desc("a", v(0), "b", v(1), "c", v(2))); codesOf(r) != "OK: OK" {
			t.Fatalf("mask %d: %s", mask, codesOf(r))
		}
	}
	m := h.get(t, "/metrics")
	labels := map[string]bool{}
	for _, line := range strings.Split(m, "\n") {
		if !strings.HasPrefix(line, "sluice_decisions_total{") {
			continue
		}
		if i := strings.Index(line, `policy="d.a`); i >= 0 {
			rest := line[i+len(`policy="`):]
			labels[rest[:strings.IndexByte(rest, '"')]] = true
		}
	}
	if len(labels) > MaxMetricValues+1 {
		var extra []string
		for l := range labels {
			if strings.Contains(l, OtherValue) || !strings.Contains(l, "_x") {
				extra = append(extra, l)
			}
		}
		t.Errorf("the detailed_metric rule has %d policy label values, want at most MaxMetricValues+1 = %d; past the budget: %q",
			len(labels), MaxMetricValues+1, extra)
	}
}

// TestOutside13UnmatchedKeysBounded: the live page's record of the last
// request that matched no rule keeps its descriptors' keys, "each key cut
// to MaxLabelValueBytes and at most 8 descriptors: the values are left out
// (they are the unbounded part)" (unmatched.go:43-45). But a descriptor's
// entries are not bounded: one unmatched RLS request of one descriptor with
// 40,000 entries leaves a LastKeys of megabytes per domain label, served
// by GET /v1/rules on every poll of the live page and written whole in the
// warning logged each second.
func TestOutside13UnmatchedKeysBounded(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	d := &rlcommon.RateLimitDescriptor{}
	key := strings.Repeat("k", MaxLabelValueBytes)
	for range 40_000 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: key, Value: "v"})
	}
	h.should(t, "rides", d)
	for _, u := range h.srv.unmatchedList() {
		if len(u.LastKeys) > 64<<10 {
			t.Errorf("domain %q: LastKeys holds %d bytes after one request of %d entries; want it bounded whatever the request (under 64 KiB)",
				u.Domain, len(u.LastKeys), len(d.Entries))
		}
	}
}
