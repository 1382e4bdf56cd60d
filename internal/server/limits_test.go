// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

// tenantsYAML has an overridable rule per algorithm (key "tenant" under
// "alg_<algorithm>") and one that is not.
func tenantsYAML() string {
	var b strings.Builder
	b.WriteString("domain: api\ndescriptors:\n")
	for _, a := range rateAlgorithms {
		b.WriteString("  - key: alg\n    value: " + string(a) + "\n    descriptors:\n")
		b.WriteString("      - key: tenant\n        rate_limit: {unit: minute, requests_per_unit: 2, algorithm: " + string(a) + ", overridable: true}\n")
	}
	b.WriteString("  - key: fixed\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	return b.String()
}

const testToken = "0123456789abcdef-test"

// rateAlgorithms are the rate algorithms, every one an override may have.
var rateAlgorithms = []sluice.Algorithm{sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket, sluice.FixedWindow, sluice.SlidingLog, sluice.SlidingWindow}

// do sends an HTTP request to h's API with the test token (unless token
// is "-") and returns the status and body.
func (h *harness) do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	return doHTTP(t, h.http.URL, method, path, token, body)
}

func doHTTP(t *testing.T, base, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "-" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// admitted counts how many of n checks of cost 1 on the descriptor
// entries (key, value pairs) in domain the API admits.
func admittedHTTP(t *testing.T, base, domain string, n int, kv ...string) int {
	t.Helper()
	var es []string
	for i := 0; i < len(kv); i += 2 {
		es = append(es, `{"key":"`+kv[i]+`","value":"`+kv[i+1]+`"}`)
	}
	body := `{"domain":"` + domain + `","descriptors":[{"entries":[` + strings.Join(es, ",") + `]}]}`
	got := 0
	for range n {
		code, s := doHTTP(t, base, "POST", "/v1/check", "-", body)
		if code != 200 {
			t.Fatalf("check: %d %s", code, s)
		}
		var r CheckResponse
		json.Unmarshal([]byte(s), &r)
		if r.Allowed {
			got++
		}
	}
	return got
}

func TestLimitsAPIOff(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML()})
	code, body := h.do(t, "PUT", "/v1/limits/api/alg=gcra/tenant=acme", testToken, `{"requests_per_unit":5}`)
	if code != http.StatusForbidden || !strings.Contains(body, "--admin-token-file") {
		t.Fatalf("without tokens configured: %d %s, want 403 naming --admin-token-file", code, body)
	}
}

func TestLimitsAPIAuth(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML()}, WithAdminTokens(AdminToken{Name: "ops", Token: testToken}))
	for _, tok := range []string{"-", "", "wrong-token-0123456789", testToken + "x"} {
		code, body := h.do(t, "PUT", "/v1/limits/api/alg=gcra/tenant=acme", tok, `{"requests_per_unit":5}`)
		if code != http.StatusUnauthorized {
			t.Errorf("token %q: %d %s, want 401", tok, code, body)
		}
	}
	if code, body := h.do(t, "GET", "/v1/limits/api", "-", ""); code != http.StatusUnauthorized {
		t.Errorf("GET without a token: %d %s, want 401", code, body)
	}
	if n := admittedHTTP(t, h.http.URL, "api", 5, "alg", "gcra", "tenant", "acme"); n != 2 {
		t.Fatalf("refused PUTs changed the limit: %d admitted, want the default 2", n)
	}
}

// TestOverrideEveryAlgorithm: an override set through the API decides the
// key's next request, for every algorithm; other keys keep the default;
// DELETE brings the default back.
func TestOverrideEveryAlgorithm(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	h := start(t, map[string]string{"api.yaml": tenantsYAML()}, WithAdminTokens(AdminToken{Name: "ops", Token: testToken}),
		WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))))
	for _, a := range rateAlgorithms {
		t.Run(string(a), func(t *testing.T) {
			path := "/v1/limits/api/alg=" + string(a) + "/tenant=acme"
			code, body := h.do(t, "PUT", path, testToken, `{"requests_per_unit":5}`)
			if code != 200 {
				t.Fatalf("PUT: %d %s", code, body)
			}
			var ans LimitAnswer
			json.Unmarshal([]byte(body), &ans)
			if ans.Override == nil || ans.Override.Limit.RequestsPerUnit != 5 || ans.Effective.RequestsPerUnit != 5 || ans.Default.RequestsPerUnit != 2 || ans.Before != nil || ans.Override.SetBy != "ops" {
				t.Fatalf("PUT answer: %s", body)
			}
			if n := admittedHTTP(t, h.http.URL, "api", 8, "alg", string(a), "tenant", "acme"); n != 5 {
				t.Errorf("acme: %d admitted, want its override's 5", n)
			}
			if n := admittedHTTP(t, h.http.URL, "api", 8, "alg", string(a), "tenant", "other"); n != 2 {
				t.Errorf("another tenant: %d admitted, want the default 2", n)
			}
			code, body = h.do(t, "GET", path, testToken, "")
			if code != 200 || !strings.Contains(body, `"requests_per_unit":5`) {
				t.Fatalf("GET: %d %s", code, body)
			}
			code, body = h.do(t, "DELETE", path, testToken, "")
			json.Unmarshal([]byte(body), &ans)
			if code != 200 || ans.Override != nil || ans.Before == nil || ans.Before.Limit.RequestsPerUnit != 5 {
				t.Fatalf("DELETE: %d %s", code, body)
			}
			// acme's state under the default is untouched (it made no
			// request under it): the default's 2 again.
			if n := admittedHTTP(t, h.http.URL, "api", 4, "alg", string(a), "tenant", "acme"); n != 2 {
				t.Errorf("after DELETE: %d admitted, want the default 2", n)
			}
			if code, body = h.do(t, "DELETE", path, testToken, ""); code != 404 {
				t.Errorf("second DELETE: %d %s, want 404", code, body)
			}
		})
	}
	mu.Lock()
	log := logs.String()
	mu.Unlock()
	for _, want := range []string{`msg="limit override changed" who=ops`, `rule=api.alg_gcra.tenant`, `before=default after="5/1m0s gcra"`, `before="5/1m0s gcra" after=default`} {
		if !strings.Contains(log, want) {
			t.Errorf("the change log lacks %s:\n%s", want, log)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestOverrideRequests(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML()}, WithAdminTokens(AdminToken{Token: testToken}))
	for _, c := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"PUT", "/v1/limits/api/fixed=x", `{"requests_per_unit":5}`, 404, "not overridable"},
		{"PUT", "/v1/limits/api/nope=x", `{"requests_per_unit":5}`, 404, "matches no rule"},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=a", `{"requests_per_unit":0}`, 400, "requests_per_unit 0"},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=a", `{"requests_per_unit":5,"unit":"fortnight"}`, 400, "unit \\\"fortnight"},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=a", `{"requests_per_unit":5,"unit":"hour","period":"1h"}`, 400, "not both"},
		{"PUT", "/v1/limits/api/alg=fixed-window/tenant=a", `{"requests_per_unit":5,"burst":9}`, 400, "burst"},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=a", `{"requests_per_unit":5,"algorithm":"nope"}`, 400, "algorithm \\\"nope"},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=a", `{"requests_per_unit":5,"extra":1}`, 400, "unknown field"},
		{"PUT", "/v1/limits/api/alg=gcra/tenant", `{"requests_per_unit":5}`, 400, "want key=value"},
		{"PUT", "/v1/limits/api/", `{"requests_per_unit":5}`, 400, "no descriptor"},
		{"POST", "/v1/limits/api/alg=gcra/tenant=a", `{"requests_per_unit":5}`, 405, "Method Not Allowed"},
		{"GET", "/v1/limits/api/alg=gcra/tenant=a", "", 200, `"override":null`},
		{"GET", "/v1/limits/api/alg=gcra/tenant=a", "", 200, `"kept":"memory: this process only, until it exits"`},
		{"PUT", "/v1/limits/api/alg=gcra/tenant=a%2Fb%3Dc", `{"requests_per_unit":7,"unit":"hour","unit_multiplier":2,"algorithm":"token-bucket","burst":9}`, 200, `"entries":[{"key":"alg","value":"gcra"},{"key":"tenant","value":"a/b=c"}]`},
		{"GET", "/v1/limits/api", "", 200, `"limit":{"requests_per_unit":7,"unit":"hour","unit_multiplier":2,"burst":9,"algorithm":"token-bucket"}`},
	} {
		code, body := h.do(t, c.method, c.path, testToken, c.body)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s %s %s: %d %s, want %d with %s", c.method, c.path, c.body, code, body, c.code, c.want)
		}
	}
	// The escaped value is the tenant's: 7 per 2 hours with a burst of 9.
	if n := admittedHTTP(t, h.http.URL, "api", 12, "alg", "gcra", "tenant", "a/b=c"); n != 9 {
		t.Errorf("tenant a/b=c: %d admitted, want its burst of 9", n)
	}
}

// TestOverrideSurvivesReload: a reload keeps the overrides; one whose rule
// is gone (or no longer overridable) is not applied, listed with applied
// false and logged, and applies again when the rule is back.
func TestOverrideSurvivesReload(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML()}, WithAdminTokens(AdminToken{Token: testToken}))
	if code, body := h.do(t, "PUT", "/v1/limits/api/alg=fixed-window/tenant=acme", testToken, `{"requests_per_unit":4}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if n := admittedHTTP(t, h.http.URL, "api", 1, "alg", "fixed-window", "tenant", "acme"); n != 1 {
		t.Fatal("not admitted")
	}
	// A reload with a change elsewhere keeps the override in force.
	writeFiles(t, h.dir, map[string]string{"api.yaml": tenantsYAML() + "  - key: more\n    rate_limit: {unit: second, requests_per_unit: 1}\n"})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	if n := admittedHTTP(t, h.http.URL, "api", 6, "alg", "fixed-window", "tenant", "acme"); n != 3 {
		t.Errorf("after a reload: %d more admitted, want 3 (4 in the window, 1 taken)", n)
	}
	// The rule no longer overridable: the default, and listed as not applied.
	writeFiles(t, h.dir, map[string]string{"api.yaml": strings.ReplaceAll(tenantsYAML(), "algorithm: fixed-window, overridable: true", "algorithm: fixed-window")})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	if n := admittedHTTP(t, h.http.URL, "api", 6, "alg", "fixed-window", "tenant", "acme"); n != 2 {
		t.Errorf("rule not overridable: %d admitted, want the default 2", n)
	}
	code, body := h.do(t, "GET", "/v1/limits/api", testToken, "")
	if code != 200 || !strings.Contains(body, `"applied":false,"reason":"rule api.alg_fixed-window.tenant is not overridable in the configuration in force"`) {
		t.Errorf("listing: %d %s", code, body)
	}
	// Back: the override applies again.
	writeFiles(t, h.dir, map[string]string{"api.yaml": tenantsYAML()})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	if n := admittedHTTP(t, h.http.URL, "api", 6, "alg", "fixed-window", "tenant", "acme"); n != 4 {
		t.Errorf("rule back: %d admitted, want the override's 4", n)
	}
	if code, body := h.do(t, "GET", "/v1/limits/api", testToken, ""); !strings.Contains(body, `"applied":true`) {
		t.Errorf("listing: %d %s", code, body)
	}
}

func TestLoadAdminTokens(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "tokens")
	os.WriteFile(f, []byte("# ops tokens\nalice 0123456789abcdefAAAA\n\n0123456789abcdefBBBB\n"), 0o600)
	ts, err := LoadAdminTokens(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "alice" || ts[0].Token != "0123456789abcdefAAAA" || !strings.HasPrefix(ts[1].Name, "sha256:") {
		t.Errorf("tokens: %+v", ts)
	}
	os.WriteFile(f, []byte("bob short\n"), 0o600)
	if _, err := LoadAdminTokens(f); err == nil || !strings.Contains(err.Error(), ":1: a token of 5 bytes") {
		t.Errorf("a short token: %v", err)
	}
	os.WriteFile(f, []byte("# nothing\n"), 0o600)
	if _, err := LoadAdminTokens(f); err == nil {
		t.Error("a file without tokens loaded")
	}
	t.Setenv(AdminTokenEnv, "0123456789abcdefCCCC")
	if tok, ok, err := EnvAdminToken(); !ok || err != nil || tok.Name != "env" {
		t.Errorf("env token: %+v %v %v", tok, ok, err)
	}
}

// BenchmarkOverrideMemory reports the heap a MemoryOverrides holds per
// override, with records as the limits API writes them (a one-entry
// descriptor, "tenant" and a 12-byte value).
func BenchmarkOverrideMemory(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := &MemoryOverrides{}
		p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 1000, Period: time.Minute}
		for i := range n {
			v := fmt.Sprintf("tenant-%06d", i)
			entries := []config.Entry{{Key: "tenant", Value: v}}
			rule := &config.Rule{FullKey: "api.tenant"}
			o := LimitOverride{Domain: "api", Rule: rule.FullKey, Entries: entries, Limit: specOf(p), SetBy: "ops", SetAt: time.Unix(1e9, 0).UTC()}
			rec, _ := json.Marshal(o)
			m.SetOverride(b.Context(), "api", overrideID(rule.FullKey, storeKey(rule, entries)), spec(p), string(rec))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/override")
		runtime.KeepAlive(m)
	}
}

// TestResetOverridden: POST /v1/reset forgets an overridden key's state
// under its override (the state that decides it), not the default's.
func TestResetOverridden(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML()}, WithAdminTokens(AdminToken{Token: testToken}))
	if code, body := h.do(t, "PUT", "/v1/limits/api/alg=fixed-window/tenant=x", testToken, `{"requests_per_unit":3}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if n := admittedHTTP(t, h.http.URL, "api", 4, "alg", "fixed-window", "tenant", "x"); n != 3 {
		t.Fatalf("%d admitted, want 3", n)
	}
	if code, body := h.post(t, "/v1/reset", `{"domain":"api","entries":[{"key":"alg","value":"fixed-window"},{"key":"tenant","value":"x"}]}`); code != 200 {
		t.Fatalf("reset: %d %s", code, body)
	}
	if n := admittedHTTP(t, h.http.URL, "api", 4, "alg", "fixed-window", "tenant", "x"); n != 3 {
		t.Errorf("after the reset: %d admitted, want the override's 3 again", n)
	}
}

// BenchmarkOverrideTenants decides one request for each of 10,000 tenants
// with overrides, on memstore: distinct=true gives each tenant a limit of
// its own (10,000 policies), distinct=false three plans (3 policies). It
// reports the heap in use per tenant after the decisions.
func BenchmarkOverrideTenants(b *testing.B) {
	const n = 10_000
	for _, distinct := range []bool{false, true} {
		b.Run(fmt.Sprintf("distinct=%v", distinct), func(b *testing.B) {
			for b.Loop() {
				st := memstore.New()
				srv, err := New(st, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
				if err != nil {
					b.Fatal(err)
				}
				c, err := config.Load(mapFS("api.yaml", "domain: api\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: gcra, overridable: true}\n"))
				if err != nil {
					b.Fatal(err)
				}
				srv.Apply(c)
				r := c.Rules()[0]
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i := range n {
					limit := int64(1000 + i%3)
					if distinct {
						limit = int64(1000 + i)
					}
					entries := []config.Entry{{Key: "tenant", Value: fmt.Sprintf("t%06d", i)}}
					p := sluice.Policy{Algorithm: sluice.GCRA, Limit: limit, Period: time.Minute}
					srv.quota.store.SetOverride(b.Context(), "api", overrideID(r.FullKey, storeKey(r, entries)), spec(p), "{}")
					if _, _, err := srv.check(b.Context(), "http", "api", []descriptor{{entries: entries, hits: 1}}); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "bytes/tenant")
				st.Close()
			}
		})
	}
}

// deadOverrides is an OverrideStore that fails every call.
type deadOverrides struct{}

var errOverridesDead = errors.New("the override store is down")

func (deadOverrides) Override(context.Context, string, string) (string, bool, error) {
	return "", false, errOverridesDead
}
func (deadOverrides) SetOverride(context.Context, string, string, string, string) (string, error) {
	return "", errOverridesDead
}
func (deadOverrides) DeleteOverride(context.Context, string, string) (string, error) {
	return "", errOverridesDead
}
func (deadOverrides) OverrideRecord(context.Context, string, string) (string, error) {
	return "", errOverridesDead
}
func (deadOverrides) Overrides(context.Context, string) (map[string]string, error) {
	return nil, errOverridesDead
}

// stallOverrides is an OverrideStore that answers nothing until its
// caller's context ends.
type stallOverrides struct{}

func (stallOverrides) Override(ctx context.Context, _, _ string) (string, bool, error) {
	<-ctx.Done()
	return "", false, ctx.Err()
}
func (stallOverrides) SetOverride(ctx context.Context, _, _, _, _ string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}
func (stallOverrides) DeleteOverride(ctx context.Context, _, _ string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}
func (stallOverrides) OverrideRecord(ctx context.Context, _, _ string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}
func (stallOverrides) Overrides(ctx context.Context, _ string) (map[string]string, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// fullOverrides is a MemoryOverrides at its bound: every new override is
// refused.
type fullOverrides struct{ *MemoryOverrides }

func (fullOverrides) SetOverride(context.Context, string, string, string, string) (string, error) {
	return "", fmt.Errorf("%w: %d overrides in memory, the most (MaxMemoryOverrides)", sluice.ErrStoreFull, MaxMemoryOverrides)
}

// TestLimitsStoreFailures: the limits API answers 502 when the override
// store fails, 504 when the caller's Sluice-Timeout passes first (it
// answered 502 then), 507 when memory is full; a decision whose override
// cannot be read is decided by the rule's default.
func TestLimitsStoreFailures(t *testing.T) {
	tok := WithAdminTokens(AdminToken{Token: testToken})
	path := "/v1/limits/api/alg=gcra/tenant=a"
	dead := start(t, map[string]string{"api.yaml": tenantsYAML()}, tok, WithOverrideStore(deadOverrides{}))
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		if code, body := dead.do(t, m, path, testToken, `{"requests_per_unit":5}`); code != 502 || !strings.Contains(body, "the override store is down") {
			t.Errorf("%s, store down: %d %s", m, code, body)
		}
	}
	if code, body := dead.do(t, "GET", "/v1/limits/api", testToken, ""); code != 502 {
		t.Errorf("list, store down: %d %s", code, body)
	}
	if n := admittedHTTP(t, dead.http.URL, "api", 3, "alg", "gcra", "tenant", "a"); n != 2 {
		t.Errorf("store down: %d admitted, want the default 2", n)
	}
	stall := start(t, map[string]string{"api.yaml": tenantsYAML()}, tok, WithOverrideStore(stallOverrides{}))
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		req, _ := http.NewRequest(m, stall.http.URL+path, bytes.NewBufferString(`{"requests_per_unit":5}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set(TimeoutHeader, "20ms")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 504 {
			t.Errorf("%s, store stalled past Sluice-Timeout: %d %s, want 504", m, resp.StatusCode, b)
		}
	}
	full := start(t, map[string]string{"api.yaml": tenantsYAML()}, tok, WithOverrideStore(fullOverrides{&MemoryOverrides{}}))
	if code, body := full.do(t, "PUT", path, testToken, `{"requests_per_unit":5}`); code != 507 {
		t.Errorf("memory full: %d %s, want 507", code, body)
	}
}

// calendarTenantsYAML is an overridable month rule (key "tenant"): a
// calendar month in Berlin, or (calendar false) a fixed-length one.
func calendarTenantsYAML(calendar bool) string {
	cal := ", calendar: true, time_zone: Europe/Berlin"
	if !calendar {
		cal = ""
	}
	return `domain: tenants
descriptors:
  - key: tenant
    rate_limit: {unit: month, requests_per_unit: 2` + cal + `, overridable: true}
`
}

// TestOverrideKeepsCalendar: an override of a calendar-month rule that
// sets only the limit counts in the rule's calendar months in its time
// zone, as the default does: across the end of February,
// duration_until_reset counts to local midnight on March 1, the quota
// comes back then and not before, and GET /v1/usage gives the calendar
// month. The override's policy dropped the calendar: its windows were 30
// days long from the Unix epoch.
func TestOverrideKeepsCalendar(t *testing.T) {
	h := start(t, map[string]string{"tenants.yaml": calendarTenantsYAML(true)}, WithAdminTokens(AdminToken{Token: testToken}))
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 2, 27, 12, 0, 0, 0, berlin)
	h.clock.Set(now)
	code, body := h.do(t, "PUT", "/v1/limits/tenants/tenant=acme", testToken, `{"requests_per_unit": 3}`)
	if code != http.StatusOK || !strings.Contains(body, `"effective":{"requests_per_unit":3,"unit":"month","algorithm":"fixed-window"}`) {
		t.Fatalf("PUT: %d %s", code, body)
	}
	toMarch := 36 * time.Hour
	var last *rls.RateLimitResponse
	for i, want := range []string{"OK: OK", "OK: OK", "OK: OK", "OVER: OVER"} {
		if last = h.should(t, "tenants", desc("tenant", "acme")); codesOf(last) != want {
			t.Fatalf("request %d under the override of 3: %s, want %s", i, codesOf(last), want)
		}
	}
	if d := last.Statuses[0].DurationUntilReset.AsDuration(); d != toMarch {
		t.Errorf("duration_until_reset %v, want %v (local midnight on March 1)", d, toMarch)
	}
	u := h.usage(t, "domain=tenants&tenant=acme")
	feb, mar := time.Date(2026, 2, 1, 0, 0, 0, 0, berlin), time.Date(2026, 3, 1, 0, 0, 0, 0, berlin)
	if !u.Override || u.Limit != 3 || u.PeriodStart == nil || !u.PeriodStart.Equal(feb) || u.PeriodEnd == nil || !u.PeriodEnd.Equal(mar) {
		t.Errorf("usage under the override: %+v, want the limit 3 in [%v, %v)", u, feb, mar)
	}
	h.clock.Set(now.Add(toMarch - time.Second))
	if got := codesOf(h.should(t, "tenants", desc("tenant", "acme"))); got != "OVER: OVER" {
		t.Errorf("a second before March: %s, want OVER: OVER", got)
	}
	h.clock.Set(now.Add(toMarch))
	for i, want := range []string{"OK: OK", "OK: OK", "OK: OK", "OVER: OVER"} {
		if got := codesOf(h.should(t, "tenants", desc("tenant", "acme"))); got != want {
			t.Errorf("request %d on March 1 (a new calendar month): %s, want %s", i, got, want)
		}
	}
	// Switching to the other window kind keeps the calendar too.
	if code, body := h.do(t, "PUT", "/v1/limits/tenants/tenant=beta", testToken, `{"requests_per_unit": 5, "algorithm": "sliding-window"}`); code != http.StatusOK {
		t.Fatalf("PUT sliding-window: %d %s", code, body)
	}
	u = h.usage(t, "domain=tenants&tenant=beta")
	apr := time.Date(2026, 4, 1, 0, 0, 0, 0, berlin)
	if u.Algorithm != "sliding-window" || u.Limit != 5 || u.PeriodStart == nil || !u.PeriodStart.Equal(mar) || u.PeriodEnd == nil || !u.PeriodEnd.Equal(apr) {
		t.Errorf("usage under a sliding-window override: %+v, want [%v, %v)", u, mar, apr)
	}
}

// TestOverrideCalendarPeriodRefused: an override cannot give a calendar
// rule another period or an algorithm without windows (the calendar could
// not be kept); the answer names the field and value. The rule's own
// period, given explicitly, is taken.
func TestOverrideCalendarPeriodRefused(t *testing.T) {
	h := start(t, map[string]string{"tenants.yaml": calendarTenantsYAML(true)}, WithAdminTokens(AdminToken{Token: testToken}))
	const path = "/v1/limits/tenants/tenant=acme"
	for _, c := range []struct {
		body string
		code int
		want string
	}{
		{`{"requests_per_unit":3,"unit":"day"}`, 400, `unit \"day\": the rule counts in calendar windows (month from day 1 in Europe/Berlin), which an override keeps`},
		{`{"requests_per_unit":3,"unit":"month","unit_multiplier":2}`, 400, `unit_multiplier 2: the rule counts in calendar windows`},
		{`{"requests_per_unit":3,"period":"24h"}`, 400, `period \"24h\": the rule counts in calendar windows`},
		{`{"requests_per_unit":3,"algorithm":"gcra"}`, 400, `algorithm \"gcra\": the rule counts in calendar windows (month from day 1 in Europe/Berlin), which an override keeps: fixed-window or sliding-window`},
		{`{"requests_per_unit":3,"algorithm":"sliding-log"}`, 400, `algorithm \"sliding-log\"`},
		{`{"requests_per_unit":3,"unit":"month"}`, 200, `"limit":{"requests_per_unit":3,"unit":"month","algorithm":"fixed-window"}`},
	} {
		code, body := h.do(t, "PUT", path, testToken, c.body)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("PUT %s: %d %s, want %d with %s", c.body, code, body, c.code, c.want)
		}
	}
}

// TestOverrideFollowsRuleCalendar: the calendar an override counts in is
// its rule's in the configuration in force. A reload that gives a
// fixed-length month rule a calendar moves its overrides onto the calendar
// months; an override whose own period the calendar does not have (a day)
// is then not applied (the default decides), and GET and the listing say
// so and why, until a reload takes the calendar away again.
func TestOverrideFollowsRuleCalendar(t *testing.T) {
	h := start(t, map[string]string{"tenants.yaml": calendarTenantsYAML(false)}, WithAdminTokens(AdminToken{Token: testToken}))
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Set(time.Date(2026, 2, 27, 12, 0, 0, 0, berlin))
	for tenant, body := range map[string]string{"acme": `{"requests_per_unit":3}`, "daily": `{"requests_per_unit":4,"unit":"day"}`} {
		if code, ans := h.do(t, "PUT", "/v1/limits/tenants/tenant="+tenant, testToken, body); code != http.StatusOK {
			t.Fatalf("PUT %s on the fixed-length rule: %d %s", tenant, code, ans)
		}
	}
	// Without a calendar: 30-day windows from the epoch.
	if st := h.should(t, "tenants", desc("tenant", "acme")).Statuses[0]; st.DurationUntilReset.AsDuration() == 36*time.Hour {
		t.Fatalf("a fixed-length month resets with the calendar one: %v", st)
	}
	writeFiles(t, h.dir, map[string]string{"tenants.yaml": calendarTenantsYAML(true)})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	// acme's override (the rule's month) now counts in calendar months (the
	// request before the reload was counted in the 30-day window from the
	// epoch, not in this one).
	for i, want := range []string{"OK: OK", "OK: OK", "OK: OK", "OVER: OVER"} {
		if got := codesOf(h.should(t, "tenants", desc("tenant", "acme"))); got != want {
			t.Errorf("acme, request %d after the reload: %s, want %s", i, got, want)
		}
	}
	if u := h.usage(t, "domain=tenants&tenant=acme"); !u.Override || u.PeriodEnd == nil || !u.PeriodEnd.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, berlin)) {
		t.Errorf("acme's usage after the reload: %+v, want its override's window to end on March 1 in Berlin", u)
	}
	// daily's override does not fit the calendar month: the default's 2.
	if n := admittedHTTP(t, h.http.URL, "tenants", 5, "tenant", "daily"); n != 2 {
		t.Errorf("daily after the reload: %d admitted, want the default 2", n)
	}
	const reason = `its limit does not fit rule tenants.tenant in the configuration in force: unit \"day\": the rule counts in calendar windows`
	code, body := h.do(t, "GET", "/v1/limits/tenants/tenant=daily", testToken, "")
	if code != 200 || !strings.Contains(body, `"applied":false,"reason":"`+reason) || !strings.Contains(body, `"effective":{"requests_per_unit":2,"unit":"month"`) {
		t.Errorf("GET daily: %d %s", code, body)
	}
	code, body = h.do(t, "GET", "/v1/limits/tenants", testToken, "")
	if code != 200 || strings.Count(body, `"applied":false`) != 1 || !strings.Contains(body, reason) {
		t.Errorf("listing: %d %s", code, body)
	}
	// Without the calendar again, daily's override applies.
	writeFiles(t, h.dir, map[string]string{"tenants.yaml": calendarTenantsYAML(false)})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	if n := admittedHTTP(t, h.http.URL, "tenants", 6, "tenant", "daily"); n != 4 {
		t.Errorf("daily without the calendar: %d admitted, want its override's 4", n)
	}
}
