// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
	synctest.Test(t, func(t *testing.T) {
		var logged lockedBuffer
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
		// The first request is logged at once; the others of its second
		// when the second is up, in one line.
		if lines := strings.Count(logged.String(), "matched no rule"); lines != 1 || !strings.Contains(logged.String(), `domains="ridez: 1 (keys rider)" unmatched_since_last_log=1`) {
			t.Errorf("%d lines logged at once (want 1, with the domain and keys):\n%s", lines, logged.String())
		}
		time.Sleep(time.Second) // the bubble's clock
		synctest.Wait()
		if lines := strings.Count(logged.String(), "matched no rule"); lines != 2 ||
			!strings.Contains(logged.String(), `domains="ride-0: 1 (keys rider), rides: 5 (keys ryder | route), ridez: 4 (keys rider), ride-1: 1 (keys rider), ride-2: 1 (keys rider), ride-3: 1 (keys rider), ride-4: 1 (keys rider)" unmatched_since_last_log=14`) {
			t.Errorf("%d lines logged a second later (want 2, the second with every domain since the first):\n%s", lines, logged.String())
		}
		var view RulesResponse
		if err := json.Unmarshal([]byte(httpGet(srv, "/v1/rules")), &view); err != nil {
			t.Fatal(err)
		}
		if len(view.Unmatched) != 2 || view.Unmatched[0].Domain != "(other)" || view.Unmatched[0].Requests != 10 || view.Unmatched[0].LastDomain != "ride-4" ||
			view.Unmatched[1].Domain != "rides" || view.Unmatched[1].Requests != 5 || view.Unmatched[1].LastKeys != "ryder | route" {
			t.Errorf("GET /v1/rules unmatched: %+v", view.Unmatched)
		}
	})
}

// TestUnmatchedLogNamesEveryDomain: a typo in Envoy's domain ("rider-apl")
// sends a request no rule matches in the same second as another unmatched
// request (a stray key in a configured domain), and nothing after. The
// contract above unmatched in unmatched.go: "logged at most once a second
// with the domain and the descriptors' keys". On main the second's one line
// named the first request's domain only, and the misspelt domain was never
// logged. Every domain of the second is logged, at most logBatchNames of
// them, then the number of the others' requests.
func TestUnmatchedLogNamesEveryDomain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lockedBuffer
		ms := memstore.New()
		defer ms.Close()
		srv, err := New(ms, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
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
		ask := func(domain string) {
			t.Helper()
			if _, err := r.ShouldRateLimit(t.Context(), rlsRequest(domain, desc("nokey", "x"))); err != nil {
				t.Fatal(err)
			}
		}
		ask("rides")
		ask("rider-apl")
		time.Sleep(5 * time.Second) // the bubble's clock: no more traffic
		log := logged.String()
		if !strings.Contains(log, `domains="rider-apl: 1 (keys nokey)"`) {
			t.Errorf("a request to the misspelt domain %q matched no rule and was admitted unlimited; the log does not name it:\n%s", "rider-apl", log)
		}
		if n := strings.Count(log, "matched no rule"); n != 2 {
			t.Errorf("%d lines, want 2 (one at once, one a second later):\n%s", n, log)
		}

		// Bounded: 20 domains in a second (the first request logged at
		// once, the others gathered) are 8 named and the others' requests
		// counted, in one line.
		for i := range 20 {
			ask("dom-" + itoa(i))
			ask("dom-" + itoa(i))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		lines := grepLines(logged.String(), "matched no rule")
		last := lines[strings.LastIndexByte(lines, '\n')+1:]
		if !strings.Contains(last, `domains="dom-0: 1 (keys nokey), dom-1: 2 (keys nokey),`) ||
			!strings.Contains(last, `dom-7: 2 (keys nokey), and 24 more requests of other domains" unmatched_since_last_log=39`) || strings.Contains(last, "dom-8") {
			t.Errorf("20 domains in a second: the line is\n%s\nwant dom-0 to dom-7 named and 24 more requests", last)
		}
	})
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
