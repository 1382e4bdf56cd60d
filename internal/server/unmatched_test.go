// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

// TestUnmatchedCounted: a request none of whose descriptors matches a rule
// (a misspelt domain, an unknown key) is counted per domain, with every
// domain no file defines as (other); logged at most once a second with the
// domain and keys; and listed in GET /v1/rules for the page. It left no
// trace at all.
func TestUnmatchedCounted(t *testing.T) {
	var logged strings.Builder // the calls below are synchronous
	store := memstore.New()
	defer store.Close()
	srv, err := New(store, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(mapFS("rides.yaml", ridesYAML))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	r := rlsServer{s: srv}
	for i := range 5 {
		for _, dom := range []string{"ridez", "ride-" + itoa(i)} {
			if _, err := r.ShouldRateLimit(t.Context(), rlsRequest(dom, desc("rider", "r1"))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.ShouldRateLimit(t.Context(), rlsRequest("rides", desc("ryder", "r1"), desc("route", "/nope"))); err != nil {
			t.Fatal(err)
		}
		// Matched: not counted.
		if _, err := r.ShouldRateLimit(t.Context(), rlsRequest("rides", desc("ryder", "r1"), desc("city", "x"))); err != nil {
			t.Fatal(err)
		}
	}
	rec := httpGet(srv, "/metrics")
	for _, want := range []string{
		`sluice_unmatched_requests_total{domain="(other)"} 10`,
		`sluice_unmatched_requests_total{domain="rides"} 5`,
	} {
		if !strings.Contains(rec, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(rec, "ride-3") || strings.Contains(rec, "ridez") {
		t.Error("a request's domain is a label value")
	}
	lines := strings.Count(logged.String(), "matched no rule")
	if lines != 1 || !strings.Contains(logged.String(), "domain=ridez") || !strings.Contains(logged.String(), "keys=rider") {
		t.Errorf("%d lines logged (want 1 within a second, with domain and keys):\n%s", lines, logged.String())
	}
	var view RulesResponse
	if err := json.Unmarshal([]byte(httpGet(srv, "/v1/rules")), &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Unmatched) != 2 || view.Unmatched[0].Domain != "(other)" || view.Unmatched[0].Requests != 10 || view.Unmatched[0].LastDomain != "ride-4" ||
		view.Unmatched[1].Domain != "rides" || view.Unmatched[1].Requests != 5 || view.Unmatched[1].LastKeys != "ryder | route" {
		t.Errorf("GET /v1/rules unmatched: %+v", view.Unmatched)
	}
}

// TestUnmatchedKeysBounded: the keys the live page keeps of the last
// request that matched no rule (and logs each second) list at most 8
// descriptors of 8 keys each, "…" marking what is left out, each key cut to
// MaxLabelValueBytes: under 8 KiB however many entries and bytes the
// request has. A descriptor's entries were listed whole: one of 40,000
// entries left 2.6 MB per domain label; within MaxDescriptors and
// config.MaxDepth, 64 × 64 keys of 512 bytes left 48 KiB.
func TestUnmatchedKeysBounded(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	d := &rlcommon.RateLimitDescriptor{}
	for i := range 10 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: "k" + itoa(i), Value: "v"})
	}
	h.should(t, "rides", d)
	if got, want := h.srv.unmatchedList()[0].LastKeys, "k0,k1,k2,k3,k4,k5,k6,k7,…"; got != want {
		t.Errorf("one descriptor of 10 keys: LastKeys %q, want %q", got, want)
	}

	long := strings.Repeat("k", 512)
	var ds []*rlcommon.RateLimitDescriptor
	for range MaxDescriptors {
		d := &rlcommon.RateLimitDescriptor{}
		for range config.MaxDepth {
			d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: long, Value: "v"})
		}
		ds = append(ds, d)
	}
	h.should(t, "rides", ds...)
	keys := h.srv.unmatchedList()[0].LastKeys
	if len(keys) > 8<<10 {
		t.Errorf("%d descriptors of %d keys of %d bytes: LastKeys holds %d bytes; want under 8 KiB", MaxDescriptors, config.MaxDepth, len(long), len(keys))
	}
	if n := strings.Count(keys, ",…"); n != 8 || !strings.HasSuffix(keys, " | …") {
		t.Errorf("LastKeys marks %d descriptors cut, want 8, and ends %q, want \" | …\"", n, keys[max(0, len(keys)-8):])
	}
}

func rlsRequest(domain string, ds ...*rlcommon.RateLimitDescriptor) *rls.RateLimitRequest {
	return &rls.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// httpGet is the body of GET path from srv's API.
func httpGet(srv *Server, path string) string {
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Body.String()
}
