// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	envoytype "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// start2026 serves the configurations in the shape of envoyproxy/ratelimit's
// 2026 test files (quota_mode, share_threshold, metadata, value_to_metric),
// over gRPC with a real client.
func start2026(t *testing.T) *harness {
	t.Helper()
	files := map[string]string{}
	names, err := filepath.Glob("../config/testdata/envoy-2026/*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("testdata: %v %v", names, err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = string(b)
	}
	return start(t, files)
}

// dyn returns a response's dynamic_metadata as plain Go values.
func dyn(r *rls.RateLimitResponse) map[string]any {
	if r.GetDynamicMetadata() == nil {
		return nil
	}
	return r.GetDynamicMetadata().AsMap()
}

// TestQuotaMode: a quota-mode descriptor over its quota refuses the request
// only when every quota-mode descriptor of it is over; an ordinary one over
// its limit refuses it as always. Over-quota descriptors say OVER_LIMIT
// and are listed in quotaModeViolations; the others take their hit.
func TestQuotaMode(t *testing.T) {
	t.Run("two backends", func(t *testing.T) {
		h := start2026(t)
		a, b := desc("backend", "a"), desc("backend", "b") // quotas 1 and 2 a minute
		for i, want := range []struct {
			codes      string
			violations []any
			backend    any // the passed descriptors' metadata, merged: the first's value wins
		}{
			{"OK: OK OK", []any{}, "a"},
			{"OK: OVER OK", []any{0.0}, "b"}, // a is out; b still has quota
			{"OVER: OVER OVER", []any{0.0, 1.0}, nil},
			{"OVER: OVER OVER", []any{0.0, 1.0}, nil},
		} {
			r := h.should(t, "quota", a, b)
			m := dyn(r)
			if got := codesOf(r); got != want.codes || m[QuotaModeEnabledKey] != true || !reflect.DeepEqual(m[QuotaModeViolationsKey], want.violations) || m["backend"] != want.backend {
				t.Errorf("request %d: %s %v; want %s, violations %v, backend %v", i, got, m, want.codes, want.violations, want.backend)
			}
		}
		// b took exactly two hits: the refused requests consumed nothing.
		if r := h.peek(t, "quota", desc("backend", "b")); r.Statuses[0].GetLimitRemaining() != 0 || r.Statuses[0].GetCode() != rls.RateLimitResponse_OVER_LIMIT {
			t.Errorf("b: %v", r.Statuses[0])
		}
		// One backend alone: its quota is all the request's quota.
		h.clock.Advance(60e9)
		for i, want := range []string{"OK: OK", "OVER: OVER"} {
			if got := codesOf(h.should(t, "quota", a)); got != want {
				t.Errorf("a alone %d: %s, want %s", i, got, want)
			}
		}
	})
	t.Run("with an ordinary descriptor", func(t *testing.T) {
		h := start2026(t)
		tenant, a, b := desc("tenant", "t1"), desc("backend", "a"), desc("backend", "b")
		if got := codesOf(h.should(t, "quota", tenant, a)); got != "OK: OK OK" {
			t.Fatalf("first: %s", got)
		}
		// a is out and is the only quota descriptor: refused, and the
		// tenant's limit is not charged.
		if got := codesOf(h.should(t, "quota", tenant, a)); got != "OVER: OK OVER" {
			t.Errorf("only quota over: %s", got)
		}
		if r := h.peek(t, "quota", desc("tenant", "t1")); r.Statuses[0].GetLimitRemaining() != 2 {
			t.Errorf("tenant remaining %d, want 2", r.Statuses[0].GetLimitRemaining())
		}
		// b has quota: admitted; the tenant and b are charged, a is not.
		r := h.should(t, "quota", tenant, a, b)
		if got := codesOf(r); got != "OK: OK OVER OK" || r.Statuses[0].GetLimitRemaining() != 1 || r.Statuses[2].GetLimitRemaining() != 1 {
			t.Errorf("one quota left: %s %v", got, r.Statuses)
		}
		// The tenant is spent: refused though b has quota, which is not
		// charged.
		if got := codesOf(h.should(t, "quota", tenant, b)); got != "OK: OK OK" {
			t.Fatalf("last tenant hit: %s", got)
		}
		h.clock.Advance(60e9)
		for range 3 {
			h.should(t, "quota", tenant)
		}
		r = h.should(t, "quota", tenant, b)
		if got := codesOf(r); got != "OVER: OVER OK" || !reflect.DeepEqual(dyn(r)[QuotaModeViolationsKey], []any{}) {
			t.Errorf("ordinary over: %s %v", got, dyn(r))
		}
		if r := h.peek(t, "quota", desc("backend", "b")); r.Statuses[0].GetLimitRemaining() != 2 {
			t.Errorf("b remaining %d, want 2 (the refused request took nothing)", r.Statuses[0].GetLimitRemaining())
		}
	})
	t.Run("zero quota", func(t *testing.T) {
		h := start2026(t)
		blocked, b := desc("blocked", "x"), desc("backend", "b")
		if r := h.should(t, "quota", blocked, b); codesOf(r) != "OK: OVER OK" || !reflect.DeepEqual(dyn(r)[QuotaModeViolationsKey], []any{0.0}) {
			t.Errorf("zero quota beside one with quota: %s %v", codesOf(r), dyn(r))
		}
		if got := codesOf(h.should(t, "quota", blocked)); got != "OVER: OVER" {
			t.Errorf("zero quota alone: %s", got)
		}
	})
	t.Run("http", func(t *testing.T) {
		h := start2026(t)
		body := `{"domain":"quota","descriptors":[{"entries":[{"key":"backend","value":"a"}]},{"entries":[{"key":"backend","value":"b"}]}]}`
		var last CheckResponse
		for i := range 2 {
			code, s := h.post(t, "/v1/check", body)
			if code != 200 {
				t.Fatal(code, s)
			}
			if i == 0 && !strings.Contains(s, `"quota_mode_violations":[]`) {
				t.Errorf("first answer lacks an empty quota_mode_violations: %s", s)
			}
			last = CheckResponse{}
			if err := json.Unmarshal([]byte(s), &last); err != nil {
				t.Fatal(err)
			}
		}
		if !last.Allowed || !reflect.DeepEqual(last.QuotaModeViolations, []int{0}) || !last.Statuses[0].QuotaMode || last.Statuses[0].Code != "OVER_LIMIT" ||
			last.Statuses[0].Metadata != nil || !reflect.DeepEqual(last.Statuses[1].Metadata, map[string]any{"backend": "b"}) {
			t.Errorf("http: %+v", last)
		}
	})
}

// TestShareThreshold: every value a share_threshold wildcard matches counts
// against one quota; an explicit value keeps its own; without sharing each
// value has its own.
func TestShareThreshold(t *testing.T) {
	h := start2026(t)
	type step struct {
		d    *rlcommon.RateLimitDescriptor
		want string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"files/* shares 3", []step{
			{desc("files", "files/a"), "OK"}, {desc("files", "files/b"), "OK"}, {desc("files", "files/c"), "OK"},
			{desc("files", "files/d"), "OVER"}, {desc("files", "files/a"), "OVER"},
			{desc("files", "files/*"), "OVER"}, // the pattern's own text is one of its values
		}},
		{"unshared wildcard: one quota per value", []step{
			{desc("unshared", "u/1"), "OK"}, {desc("unshared", "u/2"), "OK"}, {desc("unshared", "u/1"), "OVER"},
		}},
		{"explicit value beside a shared wildcard", []step{
			{desc("file", "test1"), "OK"}, {desc("file", "test1"), "OVER"},
			{desc("file", "test2"), "OK"}, {desc("file", "test3"), "OK"}, {desc("file", "test4"), "OVER"},
		}},
		{"middle wildcard", []step{
			{desc("midpath", "/api/a/v1"), "OK"}, {desc("midpath", "/apiv1"), "OK"}, {desc("midpath", "/api-b-v1"), "OVER"},
			{desc("midpath", "/api/v2"), "OK"}, // no rule
		}},
		{"several wildcards", []step{
			{desc("multiroute", "svc1ep1rpc"), "OK"}, {desc("multiroute", "svceprpc"), "OK"}, {desc("multiroute", "svc-x-ep-y-rpc"), "OVER"},
		}},
		{"the same key shared at two levels", []step{
			{desc("files", "top/1", "files", "nested/1"), "OK"}, {desc("files", "top/2", "files", "nested/2"), "OK"},
			{desc("files", "top/3", "files", "nested/3"), "OVER"},
		}},
		{"shared above unshared", []step{
			{desc("path", "path/1", "file", "file/a", "type", "x"), "OK"}, {desc("path", "path/2", "file", "file/a", "type", "x"), "OK"},
			{desc("path", "path/3", "file", "file/a", "type", "x"), "OVER"},
			{desc("path", "path/1", "file", "file/b", "type", "x"), "OK"},
		}},
	} {
		for i, s := range tc.steps {
			if got := codesOf(h.should(t, "share", s.d)); got != s.want+": "+s.want {
				t.Errorf("%s: step %d: %s, want %s", tc.name, i, got, s.want)
			}
		}
	}
}

// TestShareKeys: a shared level's key cannot be any value's key, the
// pattern's own text included, under any rule.
func TestShareKeys(t *testing.T) {
	c, err := config.LoadDir("../config/testdata/envoy-2026")
	if err != nil {
		t.Fatal(err)
	}
	shared := c.Match("share", []config.Entry{{Key: "files", Value: "files/x"}})
	asValue := []config.Entry{{Key: "files", Value: "files/*"}}
	if storeKey(shared, asValue) == storeKey(nil, asValue) {
		t.Errorf("shared key %q is also a value's key", storeKey(shared, asValue))
	}
	if storeKey(shared, asValue) != storeKey(shared, []config.Entry{{Key: "files", Value: "files/y"}}) {
		t.Error("two values of a shared wildcard have different keys")
	}
}

// TestMetadata: a descriptor's metadata comes back in dynamic_metadata (and
// in the JSON API) while it is under its limit, and not once it is over.
func TestMetadata(t *testing.T) {
	h := start2026(t)
	r := h.should(t, "meta", desc("key2", "v"))
	want := map[string]any{"service_with_quota": map[string]any{"name": "service_2", "weights": []any{1.0, 2.5}, "enabled": true}}
	if !reflect.DeepEqual(dyn(r), want) {
		t.Errorf("key2: %v, want %v", dyn(r), want)
	}
	sub := desc("key1", "value1", "subkey1", "any")
	if r := h.should(t, "meta", sub); codesOf(r) != "OK: OK" || !reflect.DeepEqual(dyn(r), map[string]any{"name": "service_1"}) {
		t.Errorf("subkey1 first: %s %v", codesOf(r), dyn(r))
	}
	if r := h.should(t, "meta", sub); codesOf(r) != "OVER: OVER" || r.GetDynamicMetadata() != nil {
		t.Errorf("subkey1 over: %s %v", codesOf(r), dyn(r))
	}
	if r := h.should(t, "meta", desc("key1", "value1", "subkey1", "subvalue1")); codesOf(r) != "OK: OK" || r.GetDynamicMetadata() != nil {
		t.Errorf("subvalue1 has no metadata: %v", dyn(r))
	}
	// Several passed descriptors: their mappings merged.
	if r := h.should(t, "meta", desc("key2", "w"), desc("key1", "value1", "subkey1", "other")); !reflect.DeepEqual(dyn(r), map[string]any{"name": "service_1", "service_with_quota": want["service_with_quota"]}) {
		t.Errorf("merged: %v", dyn(r))
	}
	code, s := h.post(t, "/v1/check", `{"domain":"meta","descriptors":[{"entries":[{"key":"key2","value":"x"}]}]}`)
	if code != 200 || !strings.Contains(s, `"metadata":{"service_with_quota":{"enabled":true,"name":"service_2","weights":[1,2.5]}}`) || strings.Contains(s, "quota_mode") {
		t.Errorf("http: %d %s", code, s)
	}
}

// TestMetadataFirstDescriptorWins: two passed descriptors whose rules'
// metadata share a key. envoyproxy/ratelimit keeps the first descriptor's
// value, and merges nested mappings key by key (mergeMetadata in its
// service/ratelimit.go): a route that picks its backend from the metadata
// goes where envoy would send it. sluice took the last descriptor's value
// and replaced a nested mapping whole.
func TestMetadataFirstDescriptorWins(t *testing.T) {
	h := start(t, map[string]string{"m.yaml": `domain: m
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 10}
    metadata:
      backend: service_1
      pool: {a: 1, c: {x: 1}}
  - key: region
    rate_limit: {unit: minute, requests_per_unit: 10}
    metadata:
      backend: service_2
      pool: {a: 5, b: 2, c: {x: 9, y: 2}}
`})
	want := map[string]any{"backend": "service_1", "pool": map[string]any{"a": 1.0, "b": 2.0, "c": map[string]any{"x": 1.0, "y": 2.0}}}
	if m := dyn(h.should(t, "m", desc("tenant", "t1"), desc("region", "eu"))); !reflect.DeepEqual(m, want) {
		t.Errorf("tenant, then region: %v; want the first's values, nested mappings merged: %v", m, want)
	}
	// The merge leaves the rules' own metadata as configured.
	want = map[string]any{"backend": "service_2", "pool": map[string]any{"a": 5.0, "b": 2.0, "c": map[string]any{"x": 9.0, "y": 2.0}}}
	if m := dyn(h.should(t, "m", desc("region", "eu"), desc("tenant", "t1"))); !reflect.DeepEqual(m, want) {
		t.Errorf("region, then tenant: %v; want %v", m, want)
	}
}

// TestValueToMetric: the request's value goes into the policy label, up to
// MaxMetricValues names per rule; the rest are counted under OtherValue.
func TestValueToMetric(t *testing.T) {
	h := start2026(t)
	h.should(t, "metrics", desc("route", "/v1/users", "method", "GET"))
	h.should(t, "metrics", desc("route", "/v1/users", "method", "POST"))
	h.should(t, "share", desc("route", "api/v1", "method", "GET"))
	for i := range MaxMetricValues + 7 {
		h.should(t, "metrics", desc("client", fmt.Sprintf("c%03d", i)))
	}
	h.should(t, "metrics", desc("client", "c000")) // admitted before: keeps its name
	m := h.get(t, "/metrics")
	for _, want := range []string{
		`sluice_decisions_total{domain="metrics",policy="metrics.route_/v1/users.method",result="ok"} 2`,
		`sluice_decisions_total{domain="share",policy="share.route_api/*.method",result="ok"} 1`, // shared: the wildcard, not the value
		`sluice_decisions_total{domain="metrics",policy="metrics.client_c000",result="ok"} 2`,
		fmt.Sprintf(`sluice_decisions_total{domain="metrics",policy="metrics.client_c%03d",result="ok"} 1`, MaxMetricValues-1),
		`sluice_decisions_total{domain="metrics",policy="metrics.client_(other)",result="ok"} 7`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if n := strings.Count(m, `policy="metrics.client_`); n != MaxMetricValues+1 {
		t.Errorf("%d label values for the client rule, want %d", n, MaxMetricValues+1)
	}
}

// TestDetailedMetricOverflowOneLabel: past MaxMetricValues, a
// detailed_metric rule counts every request under one fixed name, its path
// with OtherValue at each level, whichever of the request's values are
// empty (a key-only level matches the empty value too), so the rule adds
// MaxMetricValues+1 policy label values whatever the traffic. The name
// kept empty values empty: each pattern of empty and non-empty values was
// a label of its own, 2^depth of them (108 here, at depth 3).
func TestDetailedMetricOverflowOneLabel(t *testing.T) {
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
	for mask := range 8 { // each pattern of empty and non-empty values
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
	if want := `sluice_decisions_total{domain="d",policy="d.a_(other).b_(other).c_(other)",result="ok"} 8`; !strings.Contains(m, want) {
		t.Errorf("metrics lack %s", want)
	}
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
	if len(labels) != MaxMetricValues+1 {
		var extra []string
		for l := range labels {
			if !strings.Contains(l, "_x") {
				extra = append(extra, l)
			}
		}
		t.Errorf("the detailed_metric rule has %d policy label values, want MaxMetricValues+1 = %d; past the budget: %q",
			len(labels), MaxMetricValues+1, extra)
	}
}

// TestLongLabelValues: a request's key and value go into a policy label cut
// to MaxLabelValueBytes.
func TestLongLabelValues(t *testing.T) {
	h := start(t, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: user\n    detailed_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"})
	long := strings.Repeat("é", 1000) // 2000 bytes; the cut must not split a character
	h.should(t, "d", desc("user", long))
	m := h.get(t, "/metrics")
	want := `policy="d.user_` + strings.Repeat("é", MaxLabelValueBytes/2) + `…(cut from 2000 bytes)"`
	if !strings.Contains(m, want) {
		t.Errorf("metrics lack %s", want)
	}
	if strings.Contains(m, strings.Repeat("é", MaxLabelValueBytes/2+1)) {
		t.Error("the metrics hold more of the value than the cut")
	}
}

// TestOverrideLabels: a descriptor's limit override, whose key, values and
// limit all come from the request, adds no label value per request: its
// policy label is OverridePolicy. In a domain no file configures the
// override is ignored (TestOverrideUnknownDomain), so nothing is decided.
func TestOverrideLabels(t *testing.T) {
	h := start2026(t)
	for i := range 3 * MaxMetricValues {
		for _, domain := range []string{"metrics", fmt.Sprintf("nowhere-%d", i)} {
			d := desc("remote_address", fmt.Sprintf("10.0.%d.%d", i/256, i%256))
			d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(1 + i%7), Unit: envoytype.RateLimitUnit_SECOND}
			if got := codesOf(h.should(t, domain, d)); got != "OK: OK" {
				t.Fatalf("%s, override %d: %s", domain, i, got)
			}
		}
	}
	m := h.get(t, "/metrics")
	for _, want := range []string{
		fmt.Sprintf(`sluice_decisions_total{domain="metrics",policy="(override)",result="ok"} %d`, 3*MaxMetricValues),
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, `sluice_decisions_total{domain="(other)"`) {
		t.Error("an override in a domain no file defines was decided")
	}
	for _, leak := range []string{"10.0.", "nowhere-"} {
		if strings.Contains(m, leak) {
			t.Errorf("a request value (%q) is in the metrics", leak)
		}
	}
}

// TestUnitMultiplier: 20 requests per 5 minutes, reported as such.
func TestUnitMultiplierServe(t *testing.T) {
	h := start2026(t)
	var r *rls.RateLimitResponse
	for range 20 {
		r = h.should(t, "mult", desc("key1", "k"))
	}
	st := r.Statuses[0]
	if codesOf(r) != "OK: OK" || st.GetCurrentLimit().GetUnitMultiplier().GetValue() != 5 || st.GetCurrentLimit().GetUnit() != rls.RateLimitResponse_RateLimit_MINUTE || st.GetDurationUntilReset().AsDuration() != 5*time.Minute {
		t.Errorf("20th: %v", r)
	}
	h.clock.Advance(4*time.Minute + 59*time.Second)
	if got := codesOf(h.should(t, "mult", desc("key1", "k"))); got != "OVER: OVER" {
		t.Errorf("within the 5 minutes: %s", got)
	}
	h.clock.Advance(time.Second)
	if got := codesOf(h.should(t, "mult", desc("key1", "k"))); got != "OK: OK" {
		t.Errorf("after them: %s", got)
	}
}

// TestGlobalShadowMode: every rule answers OK and is counted as shadow,
// and so does a limit the request carries. (It asserted that the override
// was still enforced, as the README claimed envoyproxy/ratelimit does; its
// SHADOW_MODE answers OK whatever decided: TestGlobalShadowModeCoversOverrides.)
func TestGlobalShadowMode(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML}, WithShadowMode())
	for i := range 5 {
		if got := codesOf(h.should(t, "rides", desc("route", "/quotes", "rider", "r1"), desc("blocked", "x"))); got != "OK: OK OK" {
			t.Errorf("request %d: %s", i, got)
		}
	}
	m := h.get(t, "/metrics")
	for _, want := range []string{
		`sluice_decisions_total{domain="rides",policy="rides.route_/quotes.rider",result="ok"} 2`,
		`sluice_decisions_total{domain="rides",policy="rides.route_/quotes.rider",result="shadow_over_limit"} 3`,
		`sluice_decisions_total{domain="rides",policy="rides.blocked",result="shadow_over_limit"} 5`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	override := desc("rider", "r2")
	override.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: envoytype.RateLimitUnit_MINUTE}
	for i := range 2 {
		if got := codesOf(h.should(t, "rides", override)); got != "OK: OK" {
			t.Errorf("override %d: %s, want OK: OK", i, got)
		}
	}
}

// TestGlobalShadowModeCoversOverrides: under --shadow-mode
// (envoyproxy/ratelimit's SHADOW_MODE) a descriptor that carries its own
// limit (Envoy's `limit` override) never refuses either: envoy turns any
// overall OVER_LIMIT into OK ("Global ShadowMode ... will override
// whatever result is returned", its README). sluice enforced the override,
// so a dark launch refused real traffic. The would-be refusals are counted
// as shadow, under the override's policy label.
func TestGlobalShadowModeCoversOverrides(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"}, WithShadowMode())
	for _, rpu := range []uint32{1, 0} {
		o := desc("user", "u1")
		o.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: envoytype.RateLimitUnit_MINUTE}
		for i := range 3 {
			if r := h.should(t, "d", o); r.GetOverallCode() != rls.RateLimitResponse_OK {
				t.Errorf("override of %d a minute, request %d, under --shadow-mode: %s; want OK, as SHADOW_MODE answers", rpu, i, codesOf(r))
			}
		}
	}
	// 1 a minute: 1 ok, 2 shadow refusals; 0 a minute: 3 shadow refusals.
	m := h.get(t, "/metrics")
	for _, want := range []string{
		`sluice_decisions_total{domain="d",policy="(override)",result="ok"} 1`,
		`sluice_decisions_total{domain="d",policy="(override)",result="shadow_over_limit"} 5`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestMergeDomainsServe: a server loading with config.WithMergeDomains
// serves the descriptors of one domain from several files.
func TestMergeDomainsServe(t *testing.T) {
	h := start(t, nil, WithConfigOptions(config.WithMergeDomains()))
	if err := h.srv.ReloadDir("../config/testdata/merge"); err != nil {
		t.Fatal(err)
	}
	r := h.should(t, "test-domain", desc("key1", "value1"), desc("key2", "value2"), desc("key3", "prefix-x"))
	if codesOf(r) != "OK: OK OK OK" || r.Statuses[0].GetCurrentLimit().GetRequestsPerUnit() != 10 ||
		r.Statuses[1].GetCurrentLimit().GetRequestsPerUnit() != 20 || r.Statuses[2].GetCurrentLimit().GetRequestsPerUnit() != 30 {
		t.Errorf("merged domain: %v", r)
	}
	if err := h.srv.ReloadDir("../config/testdata/merge-dup"); err == nil || !strings.Contains(err.Error(), "duplicate descriptor") {
		t.Errorf("duplicate across files: %v", err)
	}
}

// countingStore counts the decision calls (rounds) made to a real
// memstore: TakeAll for several descriptors, Take for one.
type countingStore struct {
	*memstore.Store
	rounds int
}

func (c *countingStore) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	c.rounds++
	return c.Store.TakeAll(ctx, reqs, out)
}

func (c *countingStore) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	c.rounds++
	return c.Store.Take(ctx, p, key, cost)
}

// Bind refuses, so that limiters call Take (and are counted) rather than
// memstore's bound policy.
func (c *countingStore) Bind(sluice.Policy) (sluice.BoundPolicy, error) {
	return nil, errors.New("countingStore: no binding")
}

// TestQuotaModeRounds: a request takes at most one store round more than
// it has quota-mode descriptors, and each round is all-or-nothing.
func TestQuotaModeRounds(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	ms := memstore.New(memstore.WithClock(clock))
	t.Cleanup(func() { ms.Close() })
	store := &countingStore{Store: ms}
	srv, err := New(store, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(mapFS("q.yaml", `domain: q
descriptors:
  - {key: q1, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: q2, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: q3, quota_mode: true, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: o, rate_limit: {unit: minute, requests_per_unit: 5}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	rs := rlsServer{s: srv}
	ask := func(ds ...*rlcommon.RateLimitDescriptor) (string, int) {
		t.Helper()
		store.rounds = 0
		r, err := rs.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "q", Descriptors: ds})
		if err != nil {
			t.Fatal(err)
		}
		return codesOf(r), store.rounds
	}
	all := func() []*rlcommon.RateLimitDescriptor {
		return []*rlcommon.RateLimitDescriptor{desc("q1", "x"), desc("q2", "x"), desc("q3", "x"), desc("o", "x")}
	}
	for _, step := range []struct {
		ds     []*rlcommon.RateLimitDescriptor
		codes  string
		rounds int
	}{
		{[]*rlcommon.RateLimitDescriptor{desc("q1", "x")}, "OK: OK", 1},
		{[]*rlcommon.RateLimitDescriptor{desc("q2", "x")}, "OK: OK", 1},
		{all(), "OK: OVER OVER OK OK", 2},     // q1 and q2 out in round 1; q3 and o taken in round 2
		{all(), "OVER: OVER OVER OVER OK", 1}, // every quota out: refused, o not charged
	} {
		codes, rounds := ask(step.ds...)
		if codes != step.codes || rounds != step.rounds || rounds > 4 {
			t.Errorf("%s in %d rounds, want %s in %d", codes, rounds, step.codes, step.rounds)
		}
	}
	if codes, _ := ask(desc("o", "x"), desc("o", "x"), desc("o", "x"), desc("o", "x")); codes != "OK: OK OK OK OK" {
		t.Errorf("o took one hit only, so four more fit: %s", codes)
	}
}
