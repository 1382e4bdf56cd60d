// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

func (h *harness) usage(t *testing.T, query string) Usage {
	t.Helper()
	code, body := h.do(t, "GET", "/v1/usage?"+query, "-", "")
	if code != 200 {
		t.Fatalf("GET /v1/usage?%s: %d %s", query, code, body)
	}
	var u Usage
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestUsage(t *testing.T) {
	h := start(t, map[string]string{"api.yaml": tenantsYAML()}, WithAdminTokens(AdminToken{Token: testToken}))
	h.clock.Advance(90 * time.Second) // within the window [60s, 120s)
	admittedHTTP(t, h.http.URL, "api", 1, "alg", "fixed-window", "tenant", "acme")
	u := h.usage(t, "domain=api&alg=fixed-window&tenant=acme")
	start, end := time.Unix(60, 0).UTC(), time.Unix(120, 0).UTC()
	if u.Rule != "api.alg_fixed-window.tenant" || u.Algorithm != "fixed-window" || u.Limit != 2 || u.Capacity != 2 || u.Used != 1 || u.Remaining != 1 ||
		u.Period != 60 || u.PeriodStart == nil || !u.PeriodStart.Equal(start) || u.PeriodEnd == nil || !u.PeriodEnd.Equal(end) || u.FullIn != nil || u.Debt != 0 || u.Override {
		t.Errorf("fixed window: %+v", u)
	}
	// A peek: asking again changes nothing.
	if again := h.usage(t, "domain=api&alg=fixed-window&tenant=acme"); again.Used != 1 {
		t.Errorf("usage consumed: %+v", again)
	}
	// A bucket: no period; full in the time to refill what was spent.
	admittedHTTP(t, h.http.URL, "api", 1, "alg", "gcra", "tenant", "acme")
	u = h.usage(t, "domain=api&alg=gcra&tenant=acme")
	if u.Used != 1 || u.Remaining != 1 || u.PeriodStart != nil || u.FullIn == nil || *u.FullIn != 30 || u.ResetAfter != 30 {
		t.Errorf("gcra: %+v", u)
	}
	// With an override: its limit.
	if code, body := h.do(t, "PUT", "/v1/limits/api/alg=sliding-log/tenant=big", testToken, `{"requests_per_unit":10}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	admittedHTTP(t, h.http.URL, "api", 3, "alg", "sliding-log", "tenant", "big")
	u = h.usage(t, "domain=api&alg=sliding-log&tenant=big")
	if !u.Override || u.Limit != 10 || u.Used != 3 || u.Remaining != 7 || u.PeriodEnd == nil || !u.PeriodEnd.Equal(h.clock.Now()) {
		t.Errorf("override: %+v", u)
	}
	// Entries are the parameters after domain, in order, URL-encoded; a
	// key named domain comes after the domain parameter.
	for _, c := range []struct {
		query string
		code  int
		want  string
	}{
		{"alg=gcra&tenant=acme", 400, "domain: missing"},
		{"domain=api", 400, "no entries"},
		{"domain=api&tenant=acme&alg=gcra", 404, "no rule with a limit"},
		{"domain=api&alg=gcra&tenant=%zz", 400, "URL-encoded"},
		{"domain=nope&alg=gcra&tenant=acme", 404, "no rule"},
	} {
		if code, body := h.do(t, "GET", "/v1/usage?"+c.query, "-", ""); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d with %q", c.query, code, body, c.code, c.want)
		}
	}
}

// TestUsageThresholds: crossings of 80% and 100% (or a rule's own
// thresholds) are counted once per key and period, and logged once.
func TestUsageThresholds(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	yaml := `domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 4, usage_thresholds: [50]}
`
	h := start(t, map[string]string{"api.yaml": yaml}, WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))))
	metric := func(rule, th string) string {
		for _, l := range strings.Split(h.get(t, "/metrics"), "\n") {
			if strings.HasPrefix(l, `sluice_usage_threshold_crossings_total{domain="api",rule="`+rule+`",threshold="`+th+`"}`) {
				return l[strings.LastIndexByte(l, ' ')+1:]
			}
		}
		return "0"
	}
	admittedHTTP(t, h.http.URL, "api", 7, "tenant", "a") // 70%
	if m := metric("api.tenant", "80"); m != "0" {
		t.Fatalf("at 70%%: %s crossings of 80", m)
	}
	admittedHTTP(t, h.http.URL, "api", 1, "tenant", "a") // 80%
	admittedHTTP(t, h.http.URL, "api", 1, "tenant", "a") // 90%: no new crossing
	if m, m100 := metric("api.tenant", "80"), metric("api.tenant", "100"); m != "1" || m100 != "0" {
		t.Fatalf("at 90%%: %s crossings of 80 and %s of 100, want 1 and 0", m, m100)
	}
	admittedHTTP(t, h.http.URL, "api", 5, "tenant", "a") // 100%, then refused
	admittedHTTP(t, h.http.URL, "api", 10, "tenant", "b")
	if m, m100 := metric("api.tenant", "80"), metric("api.tenant", "100"); m != "2" || m100 != "2" {
		t.Errorf("two keys over: %s crossings of 80 and %s of 100, want 2 and 2", m, m100)
	}
	h.clock.Advance(time.Minute) // the next period: again
	admittedHTTP(t, h.http.URL, "api", 10, "tenant", "a")
	if m := metric("api.tenant", "100"); m != "3" {
		t.Errorf("next period: %s crossings of 100, want 3", m)
	}
	admittedHTTP(t, h.http.URL, "api", 3, "user", "u")
	if m, m80 := metric("api.user", "50"), metric("api.user", "80"); m != "1" || m80 != "0" {
		t.Errorf("usage_thresholds [50]: %s crossings of 50, %s of 80; want 1 and 0", m, m80)
	}
	mu.Lock()
	n := strings.Count(logs.String(), `msg="usage threshold crossed"`)
	mu.Unlock()
	if n != 7 {
		t.Errorf("%d crossings logged, want 7 (a: 80, 100, then 80, 100; b: 80, 100; u: 50):\n%s", n, logs.String())
	}
}

// TestThresholdMetricUsesRuleName: the rule label of
// sluice_usage_threshold_crossings_total is the rule's name, as in every
// other per-rule metric (README: "A rule has one name ... the metrics'
// `policy` and `rule` labels ... all use it"), so the series join on it.
// On main it was the full key ("rides.rider") where the others said
// "rider".
func TestThresholdMetricUsesRuleName(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	// rider: token bucket, burst 3: three requests use it all (100%), a
	// fourth is refused.
	for range 4 {
		h.should(t, "rides", desc("rider", "r1"))
	}
	m := h.get(t, "/metrics")
	for _, want := range []string{
		`sluice_rule_nearest_key_used_ratio{domain="rides",rule="rider"} `,
		`sluice_decisions_total{domain="rides",policy="rider",result="over_limit"} 1`,
		`sluice_usage_threshold_crossings_total{domain="rides",rule="rider",threshold="80"} 1`,
		`sluice_usage_threshold_crossings_total{domain="rides",rule="rider",threshold="100"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("after rider's key reached 100%%: want %s; /metrics has:\n%s", want, grepLines(m, `domain="rides"`))
		}
	}
	if strings.Contains(m, `rule="rides.rider"`) {
		t.Errorf("a series names the rule by its full key:\n%s", grepLines(m, `rule="rides.rider"`))
	}
}

// TestThresholdCrossingLogBounded: an attack from many addresses on a
// per-IP rule crosses both default thresholds for every address. On main
// each crossing logged an INFO line (200 lines for 100 addresses, at once);
// now a rule logs crossLogBurst lines, then one a second, the crossings not
// logged counted on it. The metric counts every crossing, and another
// rule's crossings have their own budget.
func TestThresholdCrossingLogBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lockedBuffer
		ms := memstore.New()
		defer ms.Close()
		srv, err := New(ms, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(mapFS("edge.yaml", `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1, name: per-ip}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
`))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Apply(c); err != nil {
			t.Fatal(err)
		}
		r := rlsServer{s: srv}
		addr := 0
		attack := func(n int) {
			t.Helper()
			for range n {
				addr++
				if _, err := r.ShouldRateLimit(t.Context(), rlsRequest("edge", desc("remote_address", fmt.Sprintf("10.0.%d.%d", addr/256, addr%256)))); err != nil {
					t.Fatal(err)
				}
			}
		}
		// lines returns the crossing lines and the lines of crossings not
		// logged since the last call.
		var seen int
		lines := func() (crossed, notLogged []string) {
			t.Helper()
			synctest.Wait()
			g := grepLines(logged.String(), "usage threshold cross")
			if g == "" {
				return nil, nil
			}
			all := strings.Split(g, "\n")
			for _, l := range all[seen:] {
				if strings.Contains(l, "not logged (") {
					notLogged = append(notLogged, l)
				} else {
					crossed = append(crossed, l)
				}
			}
			seen = len(all)
			return crossed, notLogged
		}

		attack(100) // 200 crossings at once
		if c, n := lines(); len(c) != crossLogBurst || len(n) != 0 {
			t.Errorf("100 addresses at once: %d crossing lines and %d others, want %d and 0:\n%s", len(c), len(n), crossLogBurst, logged.String())
		}
		// Another rule, in the same second: its own budget.
		if _, err := r.ShouldRateLimit(t.Context(), rlsRequest("edge", desc("user", "ann"))); err != nil {
			t.Fatal(err)
		}
		if c, _ := lines(); len(c) != 2 || !strings.Contains(c[0], "rule=edge.user") {
			t.Errorf("another rule's two crossings in that second: %q", c)
		}
		time.Sleep(time.Second) // the bubble's clock
		if c, n := lines(); len(c) != 0 || len(n) != 1 || !strings.Contains(n[0], "rule=per-ip crossings_not_logged=190") {
			t.Errorf("a second later: %q and %q, want one line of the 190 not logged", c, n)
		}
		// Sustained: 20 crossings a second for 3 seconds, one line a second.
		for range 3 {
			attack(10)
			time.Sleep(time.Second)
			if c, n := lines(); len(c) != 0 || len(n) != 1 || !strings.Contains(n[0], "crossings_not_logged=20") {
				t.Errorf("10 addresses in a second under way: %q and %q, want one line of the 20 not logged", c, n)
			}
		}
		// Quiet for crossLogBurst seconds, the budget is whole again.
		time.Sleep(crossLogBurst * time.Second)
		attack(10)
		if c, n := lines(); len(c) != crossLogBurst || len(n) != 0 {
			t.Errorf("after a quiet spell: %d crossing lines and %d others, want %d and 0", len(c), len(n), crossLogBurst)
		}
		want := `sluice_usage_threshold_crossings_total{domain="edge",rule="per-ip",threshold="100"} 140`
		if m := httpGet(srv, "/metrics"); !strings.Contains(m, want) {
			t.Errorf("want %s; /metrics has\n%s", want, grepLines(m, "sluice_usage_threshold_crossings_total{"))
		}
		time.Sleep(time.Second)
	})
}
