// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	envoytype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
)

// deadStore fails every call, as a store whose backend is unreachable.
type deadStore struct{}

var errDead = errors.New("connection refused")

func (deadStore) Take(context.Context, sluice.Policy, string, int64) (sluice.Decision, error) {
	return sluice.Decision{}, errDead
}

func (deadStore) Reset(context.Context, sluice.Policy, string) error {
	return errors.New("store unreachable")
}

func (deadStore) Close() error { return nil }

func (deadStore) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error {
	return errDead
}

func TestStoreFailure(t *testing.T) {
	var logged lockedBuffer // the calls below are synchronous; the log's timer is not
	srv, err := New(deadStore{}, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(mapFS("f.yaml", `domain: d
descriptors:
  - key: open
    rate_limit: {unit: second, requests_per_unit: 1, failure_mode: open}
  - key: closed
    rate_limit: {unit: second, requests_per_unit: 1, failure_mode: closed}
  - key: local
    rate_limit: {unit: hour, requests_per_unit: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	r := rlsServer{s: srv}
	ask := func(ds ...*rlcommon.RateLimitDescriptor) string {
		t.Helper()
		resp, err := r.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "d", Descriptors: ds})
		if err != nil {
			t.Fatal(err)
		}
		return codesOf(resp)
	}
	for i := 0; i < 3; i++ {
		if got := ask(desc("open", "x")); got != "OK: OK" {
			t.Errorf("fail-open: %s", got)
		}
	}
	if got := ask(desc("closed", "x")); got != "OVER: OVER" {
		t.Errorf("fail-closed: %s", got)
	}
	// The first failure is logged at once (the next ones within a second
	// are gathered for the next line), naming the rules involved.
	if want := `msg="store failed; the rules' failure modes decide" rules="d/d.open: 1" error="sluice: policy \"d.open\": key \"4:open1:x\": connection refused" failures_since_last_log=1`; !strings.Contains(logged.String(), want) {
		t.Errorf("the log lacks %s:\n%s", want, logged.String())
	}
	if got := ask(desc("open", "x"), desc("closed", "x")); got != "OVER: OK OVER" {
		t.Errorf("both: %s", got)
	}
	// The default, local: this replica (the only one) holds the whole
	// limit of 2 in its local store.
	for i, want := range []string{"OK: OK", "OK: OK", "OVER: OVER"} {
		if got := ask(desc("local", "x")); got != want {
			t.Errorf("fail-local %d: %s, want %s", i, got, want)
		}
	}
	// A caller that has gone (Envoy cancelled the call) is its own
	// outcome, client_gone: no store failure (sluice_store_errors_total
	// stays 8), and no decision of any failure mode (on main the local one
	// counted as failed_local_over_limit, the closed one as failed_closed).
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, key := range []string{"closed", "local"} {
		if _, err := r.ShouldRateLimit(gone, &rls.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{desc(key, "x")}}); status.Code(err) != codes.Canceled {
			t.Fatalf("a cancelled call on %s: %v, want Canceled", key, err)
		}
	}
	if _, err := r.ShouldRateLimit(gone, &rls.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{desc("open", "x"), desc("closed", "x")}}); status.Code(err) != codes.Canceled {
		t.Fatalf("a cancelled call of two descriptors: %v, want Canceled", err)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`sluice_store_errors_total{domain="d"} 8`,
		`sluice_decisions_total{domain="d",policy="d.local",result="failed_local"} 2`,
		`sluice_decisions_total{domain="d",policy="d.local",result="failed_local_over_limit"} 1`,
		`sluice_replicas 1`,
		`sluice_decisions_total{domain="d",policy="d.open",result="failed_open"} 4`,
		`sluice_decisions_total{domain="d",policy="d.closed",result="failed_closed"} 2`,
		`sluice_decisions_total{domain="d",policy="d.closed",result="client_gone"} 2`,
		`sluice_decisions_total{domain="d",policy="d.open",result="client_gone"} 1`,
		`sluice_decisions_total{domain="d",policy="d.local",result="client_gone"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "store unreachable") {
		t.Errorf("readyz with a dead store: %d %q", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, jsonPost("/v1/reset", `{"domain":"d","entries":[{"key":"open","value":"x"}]}`))
	if rec.Code != http.StatusBadGateway {
		t.Errorf("reset on a dead store: %d %s, want 502 (every Store resets; this one failed)", rec.Code, rec.Body)
	}
}

func TestLimitOverride(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	d := func() *rlcommon.RateLimitDescriptor {
		x := desc("anything", "v")
		x.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: envoytype.RateLimitUnit_MINUTE}
		return x
	}
	for i, want := range []string{"OK: OK", "OK: OK", "OVER: OVER"} {
		r := h.should(t, "rides", d())
		if got := codesOf(r); got != want {
			t.Errorf("override %d: %s, want %s", i, got, want)
		}
		if cl := r.Statuses[0].CurrentLimit; cl.GetRequestsPerUnit() != 2 || cl.GetUnit() != rls.RateLimitResponse_RateLimit_MINUTE {
			t.Errorf("override %d: current limit %v", i, cl)
		}
	}
	// Another descriptor value under the same override has its own
	// window (and the same policy: the name leaves the value out).
	other := desc("anything", "w")
	other.Limit = d().Limit
	if got := codesOf(h.should(t, "rides", other)); got != "OK: OK" {
		t.Errorf("another value under the same override: %s", got)
	}
	if a, b := overrideRule("rides", []config.Entry{{Key: "anything", Value: "v"}}, sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute}, nil),
		overrideRule("rides", []config.Entry{{Key: "anything", Value: "w"}}, sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute}, nil); a.Policy.Name != b.Policy.Name {
		t.Errorf("override policies per descriptor value: %q and %q", a.Policy.Name, b.Policy.Name)
	}
	h.clock.Advance(time.Minute)
	if got := codesOf(h.should(t, "rides", d())); got != "OK: OK" {
		t.Errorf("next window: %s", got)
	}
	// A multiplier whose period overflows is refused, not wrapped around.
	huge := d()
	huge.Limit.Unit = envoytype.RateLimitUnit_YEAR
	huge.Limit.UnitMultiplier = wrapperspb.UInt32(4000000000)
	if _, err := h.client.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "rides", Descriptors: []*rlcommon.RateLimitDescriptor{huge}}); err == nil || !strings.Contains(err.Error(), "unit_multiplier 4000000000") {
		t.Errorf("an overflowing unit multiplier: %v", err)
	}
}

// TestFailedRefusalWaits: a refusal the failure modes decided, while the
// store (a real Redis client whose server is gone) fails, tells the client
// to wait, never to retry at once: in RLS's duration_until_reset, in the
// response headers and in the JSON API.
func TestFailedRefusalWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every call is refused
	store, err := redisstore.Open("redis://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// 3 replicas: "none" (limit 2) has a local share of 0, "bucket" (burst
	// 3) a share of 1, so that 2 units are over the share but not over
	// what the store could admit, and 4 are over both.
	srv, err := New(store, WithResponseHeaders(true), WithFallback(memstore.New(), sluice.FixedReplicas(3)),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(mapFS("f.yaml", `domain: d
descriptors:
  - key: closed
    rate_limit: {unit: second, requests_per_unit: 5, failure_mode: closed}
  - key: none
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: bucket
    rate_limit: {algorithm: token-bucket, unit: hour, requests_per_unit: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	r := rlsServer{s: srv}
	ask := func(d *rlcommon.RateLimitDescriptor) (wait time.Duration, headers string) {
		t.Helper()
		resp, err := r.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		if got := codesOf(resp); got != "OVER: OVER" {
			t.Fatalf("%v: %s, want a refusal", d, got)
		}
		for _, hv := range resp.ResponseHeadersToAdd {
			headers += hv.Key + ": " + hv.Value + "\n"
		}
		return resp.Statuses[0].GetDurationUntilReset().AsDuration(), headers
	}
	cost := func(d *rlcommon.RateLimitDescriptor, n uint64) *rlcommon.RateLimitDescriptor {
		d.HitsAddend = wrapperspb.UInt64(n)
		return d
	}
	for _, tc := range []struct {
		name    string
		d       *rlcommon.RateLimitDescriptor
		wait    time.Duration
		headers string
	}{
		{"failed closed", desc("closed", "x"), time.Second, `RateLimit-Policy: "d.closed";q=5;w=1
RateLimit: "d.closed";r=0;t=1
Retry-After: 1
X-RateLimit-Limit: 5
X-RateLimit-Remaining: 0
X-RateLimit-Reset: 1
`},
		{"local, no share", desc("none", "x"), time.Second, `RateLimit-Policy: "d.none";q=2;w=3600
RateLimit: "d.none";r=0;t=1
Retry-After: 1
X-RateLimit-Limit: 2
X-RateLimit-Remaining: 0
X-RateLimit-Reset: 1
`},
		{"local, over the share", cost(desc("bucket", "x"), 2), time.Second, `RateLimit-Policy: "d.bucket";q=3;w=3600
RateLimit: "d.bucket";r=1;t=1
Retry-After: 1
X-RateLimit-Limit: 3
X-RateLimit-Remaining: 1
X-RateLimit-Reset: 1
`},
		// Over what the store could admit: impossible, no wait helps.
		{"impossible", cost(desc("bucket", "x"), 4), 0, `RateLimit-Policy: "d.bucket";q=3;w=3600
RateLimit: "d.bucket";r=1
X-RateLimit-Limit: 3
X-RateLimit-Remaining: 1
X-RateLimit-Reset: 0
`},
	} {
		wait, headers := ask(tc.d)
		if wait != tc.wait {
			t.Errorf("%s: duration_until_reset %v, want %v", tc.name, wait, tc.wait)
		}
		if headers != tc.headers {
			t.Errorf("%s: headers\n%s\nwant\n%s", tc.name, headers, tc.headers)
		}
	}

	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, jsonPost("/v1/check", `{"domain":"d","descriptors":[{"entries":[{"key":"closed","value":"x"}]}]}`))
	var resp CheckResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || len(resp.Statuses) != 1 {
		t.Fatalf("/v1/check: %d %s: %v", rec.Code, rec.Body, err)
	}
	if st := resp.Statuses[0]; resp.Allowed || !st.StoreError || st.RetryAfter != 1 || st.ResetAfter != 1 {
		t.Errorf("/v1/check, failed closed: %s; want a refusal with retry_after and reset_after 1", rec.Body)
	}
}

// TestFailedBackoffShards: while the store fails, a cost over the local
// share is impossible only if no shard could ever admit it: the largest
// shard of 11 over 4 shards holds ⌈11/4⌉ = 3.
func TestFailedBackoffShards(t *testing.T) {
	r := &config.Rule{Policy: sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 11, Period: time.Minute}, Shards: 4}
	for hits, impossible := range map[int64]bool{3: false, 4: true} {
		o := outcome{rule: r, failed: true, over: true, decision: sluice.Decision{Impossible: true}}
		failedBackoff(&o, hits)
		if o.decision.Impossible != impossible {
			t.Errorf("cost %d: impossible %v, want %v", hits, o.decision.Impossible, impossible)
		}
		if !impossible && o.decision.RetryAfter != unavailableRetryAfter {
			t.Errorf("cost %d: RetryAfter %v, want %v", hits, o.decision.RetryAfter, unavailableRetryAfter)
		}
	}
}

// TestStoreFailureLogNamesEveryFailingRule: Redis is down; every second a
// busy fail-open rule (domain "busy") fails first, then a fail-closed rule
// of another domain ("partners", refusing every partner). README (Failure
// modes, "Seeing it"): "one log line a second at most says which rules and
// why". On main each second's line named only the first request's rules
// ("domain=busy rules=busy") and counted the partners' failures under it:
// the fail-closed rule was never named. Each line now names every rule
// that failed since the last one, with the requests that failed on it; a
// request that fails on two rules (one of them in shadow mode) names both
// and counts once.
func TestStoreFailureLogNamesEveryFailingRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lockedBuffer
		srv, err := New(deadStore{}, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(fstest.MapFS{
			"busy.yaml": {Data: []byte(`domain: busy
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 100, failure_mode: open, name: busy}
  - key: dark
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 100, failure_mode: open}
`)},
			"partners.yaml": {Data: []byte(`domain: partners
descriptors:
  - key: partner
    rate_limit: {unit: second, requests_per_unit: 100, failure_mode: closed, name: partners}
`)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Apply(c); err != nil {
			t.Fatal(err)
		}
		r := rlsServer{s: srv}
		ask := func(domain string, ds ...*rlcommon.RateLimitDescriptor) {
			t.Helper()
			if _, err := r.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: domain, Descriptors: ds}); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			ask("busy", desc("k", "x"))
			ask("partners", desc("partner", "acme"))
			time.Sleep(1100 * time.Millisecond) // the bubble's clock
		}
		ask("busy", desc("k", "x"), desc("dark", "y"))
		time.Sleep(time.Second)
		synctest.Wait()
		var got []string
		for _, l := range strings.Split(logged.String(), "\n") {
			if strings.Contains(l, "store failed") {
				i := strings.Index(l, "rules=")
				j := strings.Index(l, " error=")
				k := strings.Index(l, " failures_since_last_log=")
				if i < 0 || j < i || k < j || !strings.Contains(l[j:k], "connection refused") {
					t.Fatalf("a line without rules, error or count: %s", l)
				}
				got = append(got, l[i:j]+l[k:])
			}
		}
		want := []string{
			`rules="busy/busy: 1" failures_since_last_log=1`, // at once
			`rules="partners/partners: 1" failures_since_last_log=1`,
			`rules="busy/busy: 1, partners/partners: 1" failures_since_last_log=2`,
			`rules="busy/busy: 1, partners/partners: 1" failures_since_last_log=2`,
			`rules="busy/busy: 1, busy/busy.dark: 1" failures_since_last_log=1`,
		}
		if !slices.Equal(got, want) {
			t.Errorf("the lines say\n%s\nwant\n%s\nlog:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), logged.String())
		}
		var m dto.Metric
		if err := srv.metrics.storeErrors.WithLabelValues("partners").Write(&m); err != nil || m.GetCounter().GetValue() != 3 {
			t.Errorf("sluice_store_errors_total{domain=partners} %v (%v), want 3", m.GetCounter().GetValue(), err)
		}
	})
}

// TestStoreFailureLogCountsRequests: the once-a-second store-failure line
// counts requests, each rule's and its own (CHANGELOG: "as `domain/name:
// requests`"), however many store calls a request made. A fail-closed
// count_refused rule (Envoy's check-then-debit budgets) calls the store
// twice per request on a dead store: the take, then the charge of the
// refused hits. On main each call counted on the rule: the first request's
// charge, failing after its take's line went out, made a line of its own a
// second later, naming the rule once with failures_since_last_log=0, and
// three requests in the next second logged the rule 6 times, failures 3.
func TestStoreFailureLogCountsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lockedBuffer
		srv, err := New(deadStore{}, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(fstest.MapFS{"budget.yaml": {Data: []byte(`domain: budget
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 100, failure_mode: closed, count_refused: true, name: budget}
`)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Apply(c); err != nil {
			t.Fatal(err)
		}
		r := rlsServer{s: srv}
		ask := func() {
			t.Helper()
			resp, err := r.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "budget", Descriptors: []*rlcommon.RateLimitDescriptor{desc("k", "x")}})
			if err != nil || resp.OverallCode != rls.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("a fail-closed rule on a dead store: %v %v, want OVER_LIMIT", resp, err)
			}
		}
		ask() // logged at once
		time.Sleep(1100 * time.Millisecond)
		for range 3 {
			ask() // the first logged at once, the others a second later
		}
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		var got []string
		for _, l := range strings.Split(logged.String(), "\n") {
			if strings.Contains(l, "store failed") {
				i := strings.Index(l, "rules=")
				j := strings.Index(l, " error=")
				k := strings.Index(l, " failures_since_last_log=")
				if i < 0 || j < i || k < j || !strings.Contains(l[j:k], "connection refused") {
					t.Fatalf("a line without rules, error or count: %s", l)
				}
				got = append(got, l[i:j]+l[k:])
			}
		}
		want := []string{
			`rules="budget/budget: 1" failures_since_last_log=1`,
			`rules="budget/budget: 1" failures_since_last_log=1`,
			`rules="budget/budget: 2" failures_since_last_log=2`,
		}
		if !slices.Equal(got, want) {
			t.Errorf("the lines say\n%s\nwant each rule's failed requests\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		var m dto.Metric
		if err := srv.metrics.storeErrors.WithLabelValues("budget").Write(&m); err != nil || m.GetCounter().GetValue() != 4 {
			t.Errorf("sluice_store_errors_total{domain=budget} %v (%v), want 4: one a request", m.GetCounter().GetValue(), err)
		}
	})
}

// TestResetFailureLogNamesRule: a reset the store fails is logged under the
// rule's name, "domain/name", as every other store failure is (it was
// logged under the rule's full key, "busy/busy.k", which no metric or
// other line uses).
func TestResetFailureLogNamesRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lockedBuffer
		srv, err := New(deadStore{}, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(fstest.MapFS{"busy.yaml": {Data: []byte("domain: busy\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 100, name: busy}\n")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Apply(c); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, jsonPost("/v1/reset", `{"domain":"busy","entries":[{"key":"k","value":"x"}]}`))
		if rec.Code != http.StatusBadGateway {
			t.Fatalf("reset on a dead store: %d %s, want 502", rec.Code, rec.Body)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if l := logged.String(); !strings.Contains(l, `rules="busy/busy: 1"`) {
			t.Errorf("the store failure's line does not name the rule busy/busy:\n%s", l)
		}
	})
}
