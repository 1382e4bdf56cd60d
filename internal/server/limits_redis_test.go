// SPDX-License-Identifier: Apache-2.0

package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// redisFleet starts n servers on the Redis at addr (keys prefixed with the
// test's name) with the rules of dir and the admin token testToken, and
// returns their HTTP URLs and the servers.
func redisFleet(t *testing.T, addr, dir string, n int) ([]string, []*Server) {
	t.Helper()
	urls, srvs := make([]string, n), make([]*Server, n)
	for i := range urls {
		st, err := redisstore.Open("redis://"+addr, redisstore.WithPrefix(t.Name()+":"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		srv, err := New(st, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithAdminTokens(AdminToken{Name: "ops", Token: testToken}))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.ReloadDir(dir); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		urls[i], srvs[i] = hs.URL, srv
	}
	return urls, srvs
}

// TestOverrideFleetRedis is the test: three replicas (Servers, each
// with its own Redis client and so its own client-side cache) on one real
// Redis. A tenant's limit changed through one replica's API takes effect on
// the next request on every replica, survives a reload of the files, goes
// back to the default on DELETE everywhere, and is refused without the
// token. Every algorithm.
func TestOverrideFleetRedis(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"api.yaml": tenantsYAML()})
	urls, srvs := redisFleet(t, addr, dir, 3)
	// Windows of a minute (and buckets refilling 2 a minute): each case
	// finishes well within one, so the counts are exact; each algorithm
	// and round uses a tenant of its own.
	for _, a := range []string{"token-bucket", "gcra", "leaky-bucket", "fixed-window", "sliding-log", "sliding-window"} {
		t.Run(a, func(t *testing.T) {
			tenant := "acme-" + a
			path := "/v1/limits/api/alg=" + a + "/tenant=" + tenant
			// Every replica reads the (absent) override first, so each
			// has it cached when it changes.
			first := 0
			for _, u := range urls {
				first += admittedHTTP(t, u, "api", 1, "alg", a, "tenant", tenant)
			}
			if first != 2 {
				t.Fatalf("the first 3 requests: %d admitted, want the default 2", first)
			}
			if code, body := doHTTP(t, urls[0], "PUT", path, "-", `{"requests_per_unit":9}`); code != http.StatusUnauthorized {
				t.Fatalf("PUT without a token: %d %s", code, body)
			}
			if code, body := doHTTP(t, urls[0], "PUT", path, testToken, `{"requests_per_unit":9}`); code != 200 {
				t.Fatalf("PUT: %d %s", code, body)
			}
			// The next requests on every replica: the override's 9 over
			// the three (one key's state, under the override's policy).
			got := 0
			for _, u := range urls {
				got += admittedHTTP(t, u, "api", 4, "alg", a, "tenant", tenant)
			}
			if got != 9 {
				t.Errorf("after the PUT on replica 0: %d admitted over 3 replicas, want the override's 9", got)
			}
			// A reload on every replica keeps it (a change elsewhere in the file).
			writeFiles(t, dir, map[string]string{"api.yaml": tenantsYAML() + "  - key: more_" + strings.ReplaceAll(a, "-", "_") + "\n    rate_limit: {unit: second, requests_per_unit: 1}\n"})
			for _, s := range srvs {
				if err := s.ReloadDir(dir); err != nil {
					t.Fatal(err)
				}
			}
			code, body := doHTTP(t, urls[2], "GET", path, testToken, "")
			if code != 200 || !strings.Contains(body, `"effective":{"requests_per_unit":9`) || !strings.Contains(body, `"kept":"store: shared`) {
				t.Errorf("GET on replica 2 after the reload: %d %s", code, body)
			}
			// Raised again through replica 1: 3 more for the key, seen by the next request anywhere.
			if code, body := doHTTP(t, urls[1], "PUT", path, testToken, `{"requests_per_unit":12}`); code != 200 {
				t.Fatalf("PUT: %d %s", code, body)
			}
			got = 0
			for _, u := range []string{urls[2], urls[0], urls[1]} {
				got += admittedHTTP(t, u, "api", 2, "alg", a, "tenant", tenant)
			}
			// The override's policy changed (12 ≠ 9): a fresh state under
			// the new one, 6 of 6 admitted.
			if got != 6 {
				t.Errorf("after the second PUT: %d admitted, want 6 (12 under a fresh state)", got)
			}
			// DELETE through replica 2: every replica is back on the
			// default 2, which the first requests spent.
			if code, body := doHTTP(t, urls[2], "DELETE", path, testToken, ""); code != 200 {
				t.Fatalf("DELETE: %d %s", code, body)
			}
			got = 0
			for _, u := range urls {
				got += admittedHTTP(t, u, "api", 2, "alg", a, "tenant", tenant)
			}
			if got != 0 {
				t.Errorf("after DELETE: %d admitted, want 0 (the default 2, spent by the first requests)", got)
			}
		})
	}
}

// TestOverrideKeepsCalendarRedis: with the overrides kept in Redis, two
// replicas decide an overridden tenant of a calendar-month rule in the
// rule's calendar months (Berlin) under the override's limit, and
// GET /v1/usage on either gives the calendar month, as for a tenant on the
// default: the override's policy dropped the calendar, and its window was
// 30 days from the Unix epoch.
func TestOverrideKeepsCalendarRedis(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"tenants.yaml": calendarTenantsYAML(true)})
	urls, _ := redisFleet(t, addr, dir, 2)
	if code, body := doHTTP(t, urls[0], "PUT", "/v1/limits/tenants/tenant=acme", testToken, `{"requests_per_unit": 3}`); code != http.StatusOK || !strings.Contains(body, `"kept":"store: shared`) {
		t.Fatalf("PUT: %d %s", code, body)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// The calendar month that holds t, in Berlin.
	month := func(t time.Time) (time.Time, time.Time) {
		t = t.In(berlin)
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, berlin), time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, berlin)
	}
	usage := func(url, tenant string) Usage {
		t.Helper()
		code, body := doHTTP(t, url, "GET", "/v1/usage?domain=tenants&tenant="+tenant, "-", "")
		var u Usage
		if err := json.Unmarshal([]byte(body), &u); code != 200 || err != nil {
			t.Fatalf("usage: %d %s", code, body)
		}
		return u
	}
	before := time.Now()
	got := admittedHTTP(t, urls[0], "tenants", 2, "tenant", "acme") + admittedHTTP(t, urls[1], "tenants", 2, "tenant", "acme")
	plain, over := usage(urls[0], "other"), usage(urls[1], "acme")
	after := time.Now()
	if got != 3 {
		t.Errorf("acme over 2 replicas: %d admitted, want the override's 3", got)
	}
	for _, c := range []struct {
		name string
		u    Usage
	}{{"other (the default)", plain}, {"acme (overridden)", over}} {
		ok := false
		for _, at := range []time.Time{before, after} { // a month may end between them
			start, end := month(at)
			ok = ok || c.u.PeriodStart != nil && c.u.PeriodStart.Equal(start) && c.u.PeriodEnd != nil && c.u.PeriodEnd.Equal(end)
		}
		if !ok {
			t.Errorf("%s: window [%v, %v), want the calendar month in Berlin that holds %v", c.name, c.u.PeriodStart, c.u.PeriodEnd, before)
		}
	}
	if !over.Override || over.Limit != 3 || over.Used != 3 {
		t.Errorf("acme's usage: %+v, want the override's limit 3, all used", over)
	}
}
