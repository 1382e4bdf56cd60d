// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// usageCalendarYAML has two calendar months in Berlin: from the 1st (a
// fixed window) and from the 15th (a sliding window).
const usageCalendarYAML = `domain: billing
descriptors:
  - key: tenant
    rate_limit: {unit: month, requests_per_unit: 10, calendar: true, time_zone: Europe/Berlin}
  - key: seat
    rate_limit: {unit: month, requests_per_unit: 10, algorithm: sliding-window, calendar: true, time_zone: Europe/Berlin, anchor_day: 15}
`

// startOnClock starts a Server over the store newStore makes on the
// harness's manual clock (which the Server reads too), configured from
// files, with its HTTP API only (no gRPC client) and its log written to w.
func startOnClock(t *testing.T, newStore func(*sluicetest.Clock) sluice.Store, files map[string]string, w io.Writer) *harness {
	t.Helper()
	h := &harness{clock: sluicetest.NewClock(t0), dir: t.TempDir()}
	writeFiles(t, h.dir, files)
	srv, err := New(newStore(h.clock), WithLogger(slog.New(slog.NewTextHandler(w, nil))))
	if err != nil {
		t.Fatal(err)
	}
	srv.now = h.clock.Now
	h.srv = srv
	if err := srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	h.http = httptest.NewServer(srv.Handler())
	t.Cleanup(h.http.Close)
	return h
}

// TestUsageCalendar: a calendar rule's usage-threshold crossings are
// counted once per key and threshold in each calendar window (here
// months in Berlin), not in each period of the rule's nominal length (30
// days) aligned to the Unix epoch; the crossing's log gives the calendar
// window's end; and GET /v1/usage gives the calendar window and the time
// to its end. On memory and on Redis (with the store on the same manual
// clock).
//
// 2026-02-27 and 2026-03-02 are in one 30-day period since the epoch
// ([Feb 6, Mar 8) UTC) but in two months; 2026-03-02 and 2026-03-10 are in
// two such periods but one month. Counted on the epoch grid, a tenant that
// reaches 80% on Feb 27 and again on Mar 2 crossed once, and one that
// reaches 80% on Mar 2 and is still there on Mar 10 crossed twice.
func TestUsageCalendar(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) func(*sluicetest.Clock) sluice.Store
	}{
		{"memory", func(t *testing.T) func(*sluicetest.Clock) sluice.Store {
			return func(c *sluicetest.Clock) sluice.Store {
				ms := memstore.New(memstore.WithClock(c))
				t.Cleanup(func() { ms.Close() })
				return ms
			}
		}},
		{"redis", func(t *testing.T) func(*sluicetest.Clock) sluice.Store {
			return redisOnClock(t, sluicetest.StartRedis(t))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var logs bytes.Buffer
			h := startOnClock(t, c.store(t), map[string]string{"billing.yaml": usageCalendarYAML}, lockedWriter{&mu, &logs})
			testUsageCalendar(t, h, func() string {
				mu.Lock()
				defer mu.Unlock()
				return logs.String()
			})
		})
	}
}

func testUsageCalendar(t *testing.T, h *harness, logs func() string) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	noon := func(m time.Month, d int) time.Time { return time.Date(2026, m, d, 12, 0, 0, 0, berlin) }
	month := calendar.Month.Nominal()
	epochPeriod := func(t time.Time) int64 { return t.UnixNano() / int64(month) }
	if epochPeriod(noon(2, 27)) != epochPeriod(noon(3, 2)) || epochPeriod(noon(3, 2)) == epochPeriod(noon(3, 10)) {
		t.Fatal("the dates no longer straddle the epoch grid as the test assumes")
	}
	crossings := func(th string) int {
		t.Helper()
		for _, l := range strings.Split(h.get(t, "/metrics"), "\n") {
			if strings.HasPrefix(l, `sluice_usage_threshold_crossings_total{domain="billing",rule="billing.tenant",threshold="`+th+`"}`) {
				n, err := strconv.Atoi(l[strings.LastIndexByte(l, ' ')+1:])
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		return 0
	}
	// take has tenant take n at t and returns the crossings of 80% it
	// counted.
	take := func(tenant string, at time.Time, n int) int {
		t.Helper()
		h.clock.Set(at)
		before := crossings("80")
		if got := admittedHTTP(t, h.http.URL, "billing", n, "tenant", tenant); got != n {
			t.Fatalf("%s at %v: %d of %d admitted", tenant, at, got, n)
		}
		return crossings("80") - before
	}

	if n := take("a", noon(2, 27), 8); n != 1 {
		t.Errorf("a reaches 80%% on Feb 27: %d crossings, want 1", n)
	}
	if n := take("a", noon(3, 2), 8); n != 1 {
		t.Errorf("a reaches 80%% again on Mar 2, in March: %d crossings, want 1 (a new month)", n)
	}
	if n := take("b", noon(3, 2), 8); n != 1 {
		t.Errorf("b reaches 80%% on Mar 2: %d crossings, want 1", n)
	}
	if n := take("b", noon(3, 10), 1); n != 0 {
		t.Errorf("b, still above 80%% on Mar 10, in the same month: %d crossings, want 0", n)
	}
	// The log says when the period crossed in ends: midnight on the 1st in
	// Berlin.
	l := logs()
	for _, end := range []time.Time{time.Date(2026, 3, 1, 0, 0, 0, 0, berlin), time.Date(2026, 4, 1, 0, 0, 0, 0, berlin)} {
		if want := "period_end=" + end.UTC().Format("2006-01-02T15:04:05.000Z07:00"); !strings.Contains(l, want) {
			t.Errorf("no crossing logged with %s:\n%s", want, l)
		}
	}
	if n := strings.Count(l, `msg="usage threshold crossed"`); n != 3 {
		t.Errorf("%d crossings logged, want 3 (a in February, a and b in March):\n%s", n, l)
	}

	// GET /v1/usage: the calendar month, and the time to its end.
	now := noon(3, 10)
	mar, apr := time.Date(2026, 3, 1, 0, 0, 0, 0, berlin), time.Date(2026, 4, 1, 0, 0, 0, 0, berlin)
	u := h.usage(t, "domain=billing&tenant=b")
	if u.PeriodStart == nil || !u.PeriodStart.Equal(mar) || u.PeriodEnd == nil || !u.PeriodEnd.Equal(apr) || u.Used != 9 || u.ResetAfter != apr.Sub(now).Seconds() {
		t.Errorf("usage of b on Mar 10: %+v, want [%v, %v), 9 used, reset after %v", u, mar, apr, apr.Sub(now))
	}
	// A sliding window of months from the 15th.
	h.clock.Set(noon(3, 2))
	admittedHTTP(t, h.http.URL, "billing", 2, "seat", "s")
	feb15, mar15 := time.Date(2026, 2, 15, 0, 0, 0, 0, berlin), time.Date(2026, 3, 15, 0, 0, 0, 0, berlin)
	u = h.usage(t, "domain=billing&seat=s")
	if u.PeriodStart == nil || !u.PeriodStart.Equal(feb15) || u.PeriodEnd == nil || !u.PeriodEnd.Equal(mar15) || u.Used != 2 {
		t.Errorf("usage of a sliding window of months from the 15th on Mar 2: %+v, want [%v, %v), 2 used", u, feb15, mar15)
	}
}

// redisOnClock returns a maker of stores on the Redis at addr (keys
// prefixed with the test's name) that read the given fake clock.
func redisOnClock(t *testing.T, addr string) func(*sluicetest.Clock) sluice.Store {
	return func(c *sluicetest.Clock) sluice.Store {
		rs, err := redisstore.Open("redis://"+addr, redisstore.WithPrefix(t.Name()+":"), redisstore.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		return rs
	}
}
