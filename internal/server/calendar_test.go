// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const calendarYAML = `domain: tenants
descriptors:
  - key: tenant
    rate_limit: {unit: month, requests_per_unit: 2, calendar: true, time_zone: Europe/Berlin}
  - key: fixed
    rate_limit: {unit: month, requests_per_unit: 2}
`

// TestCalendarRule answers a calendar month in Berlin over RLS across the
// end of February: duration_until_reset counts to local midnight on March
// 1, for a key that has taken nothing (a peek) too, where a fixed-length
// month counts to a multiple of 30 days since the epoch; and the quota
// comes back on the 1st. Without the calendar branch in toProto the peek
// says the fixed month's reset.
func TestCalendarRule(t *testing.T) {
	h := start(t, map[string]string{"tenants.yaml": calendarYAML})
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 2, 27, 12, 0, 0, 0, berlin)
	h.clock.Set(now)
	toMarch := 36 * time.Hour
	peek := desc("tenant", "acme")
	peek.HitsAddend = wrapperspb.UInt64(0)
	st := h.should(t, "tenants", peek).Statuses[0]
	if st.Code != rls.RateLimitResponse_OK || st.DurationUntilReset.AsDuration() != toMarch || st.LimitRemaining != 2 {
		t.Errorf("peek: %v, want OK, 2 left, reset in %v", st, toMarch)
	}
	for i, want := range []string{"OK: OK", "OK: OK", "OVER: OVER"} {
		if got := codesOf(h.should(t, "tenants", desc("tenant", "acme"))); got != want {
			t.Errorf("request %d: %s, want %s", i, got, want)
		}
	}
	if st := h.should(t, "tenants", desc("fixed", "acme")).Statuses[0]; st.DurationUntilReset.AsDuration() == toMarch {
		t.Errorf("the fixed-length month resets with the calendar one: %v", st)
	}
	h.clock.Set(now.Add(toMarch - time.Second))
	if got := codesOf(h.should(t, "tenants", desc("tenant", "acme"))); got != "OVER: OVER" {
		t.Errorf("a second before March: %s", got)
	}
	h.clock.Set(now.Add(toMarch))
	st = h.should(t, "tenants", desc("tenant", "acme")).Statuses[0]
	if march := 31*24*time.Hour - time.Hour; st.Code != rls.RateLimitResponse_OK || st.DurationUntilReset.AsDuration() != march {
		t.Errorf("on March 1: %v, want OK and reset in %v (Berlin's March)", st, march)
	}
	// GET /v1/usage gives the calendar month, not a 30-day window.
	u := h.usage(t, "domain=tenants&tenant=acme")
	mar, apr := time.Date(2026, 3, 1, 0, 0, 0, 0, berlin), time.Date(2026, 4, 1, 0, 0, 0, 0, berlin)
	if u.PeriodStart == nil || !u.PeriodStart.Equal(mar) || u.PeriodEnd == nil || !u.PeriodEnd.Equal(apr) || u.Used != 1 {
		t.Errorf("usage of a calendar month: %+v, want [%v, %v) with 1 used", u, mar, apr)
	}
}
