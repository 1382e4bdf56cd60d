// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/config"
)

// TestStoreErrorsCountRequests: with the store down, one request counts
// once in sluice_store_errors_total and in /v1/status's store failures,
// however many of its descriptors' store calls failed (an enforced and a
// shadow-mode rule; --shadow-mode's copies), and a failed reset counts in
// both, so the two never disagree.
func TestStoreErrorsCountRequests(t *testing.T) {
	const rules = `domain: d
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 100, failure_mode: open}
  - key: b
    shadow_mode: %s
    rate_limit: {unit: hour, requests_per_unit: 100, failure_mode: open}
`
	start := func(t *testing.T, yaml string, opts ...Option) *Server {
		t.Helper()
		srv, err := New(deadStore{}, append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(mapFS("f.yaml", yaml))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Apply(c); err != nil {
			t.Fatal(err)
		}
		return srv
	}
	counts := func(t *testing.T, srv *Server) (metric float64, status int64) {
		t.Helper()
		var m dto.Metric
		if err := srv.metrics.storeErrors.WithLabelValues("d").Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue(), srv.statusView(srv.now()).Store.Failures
	}
	for name, srv := range map[string]func(t *testing.T) *Server{
		"enforced and shadow-mode rules": func(t *testing.T) *Server { return start(t, strings.Replace(rules, "%s", "true", 1)) },
		"--shadow-mode": func(t *testing.T) *Server {
			return start(t, strings.Replace(rules, "%s", "false", 1), WithShadowMode())
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := srv(t)
			req := &rls.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{desc("a", "1"), desc("b", "1")}}
			if _, err := (rlsServer{s: s}).ShouldRateLimit(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if m, st := counts(t, s); m != 1 || st != 1 {
				t.Fatalf("one request, store down: metric %v, status failures %d; want 1 and 1", m, st)
			}
		})
	}
	t.Run("reset", func(t *testing.T) {
		s := start(t, strings.Replace(rules, "%s", "false", 1))
		ts := httptest.NewServer(s.Handler())
		defer ts.Close()
		resp, err := http.Post(ts.URL+"/v1/reset", "application/json", strings.NewReader(`{"domain":"d","entries":[{"key":"a","value":"1"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("reset on a dead store: %d, want 502", resp.StatusCode)
		}
		if m, st := counts(t, s); m != 1 || st != 1 {
			t.Fatalf("a failed reset: metric %v, status failures %d; want 1 and 1", m, st)
		}
	})
}
