// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/calendar"
)

func TestCalendar(t *testing.T) {
	c := mustLoad(t, `domain: d
descriptors:
  - key: billing
    rate_limit: {unit: month, requests_per_unit: 1000, calendar: true, time_zone: Europe/Berlin, anchor_day: 15}
  - key: fixed
    rate_limit: {unit: month, requests_per_unit: 1000}
  - key: weekly
    rate_limit: {unit: WEEK, requests_per_unit: 10, algorithm: sliding-window, calendar: true, anchor_weekday: Sunday}
  - key: yearly
    rate_limit: {unit: year, requests_per_unit: 10, calendar: true, time_zone: America/New_York, anchor_month: 4, anchor_day: 6}
  - key: daily
    rate_limit: {unit: day, requests_per_unit: 10, calendar: true}
  - key: off
    rate_limit: {unit: day, requests_per_unit: 10, calendar: false}
`)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want calendar.Calendar
		zone string
	}{
		{"billing", calendar.Calendar{Unit: calendar.Month, Day: 15}, "Europe/Berlin"},
		{"fixed", calendar.Calendar{}, ""},
		{"weekly", calendar.Calendar{Unit: calendar.Week, Day: 7}, ""},
		{"yearly", calendar.Calendar{Unit: calendar.Year, Month: time.April, Day: 6}, "America/New_York"},
		{"daily", calendar.Calendar{Unit: calendar.Day}, ""},
		{"off", calendar.Calendar{}, ""},
	} {
		r := c.Match("d", []Entry{{tc.key, "x"}})
		if r == nil {
			t.Fatalf("%s: no rule", tc.key)
		}
		got := r.Policy.Calendar
		zone := ""
		if got.Location != nil {
			zone = got.Location.String()
		}
		got.Location = nil
		if got != tc.want || zone != tc.zone {
			t.Errorf("%s: calendar %+v in %q, want %+v in %q", tc.key, got, zone, tc.want, tc.zone)
		}
		if r.Policy.Period != 0 && tc.want.Unit != 0 && r.Policy.Period != tc.want.Unit.Nominal() {
			t.Errorf("%s: period %v", tc.key, r.Policy.Period)
		}
	}
	// The fixed-length month is 30 days, as in envoyproxy/ratelimit.
	if p := c.Match("d", []Entry{{"fixed", "x"}}).Policy; p.Period != 30*24*time.Hour {
		t.Errorf("fixed: period %v, want 720h", p.Period)
	}
	// One zone, one *time.Location: a reload's policies equal the old ones.
	again := mustLoad(t, `domain: d
descriptors:
  - key: billing
    rate_limit: {unit: month, requests_per_unit: 1000, calendar: true, time_zone: Europe/Berlin, anchor_day: 15}
`)
	old, now := c.Match("d", []Entry{{"billing", "x"}}).Policy, again.Match("d", []Entry{{"billing", "x"}}).Policy
	if old != now {
		t.Errorf("the same rule loaded twice: %v and %v differ", old, now)
	}
	// The window is Berlin's.
	if w := old.Calendar.Location; w.String() != berlin.String() {
		t.Errorf("zone %v", w)
	}
}

func TestCalendarErrors(t *testing.T) {
	const head = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: "
	for _, tc := range []struct{ limit, want string }{
		{"{unit: month, requests_per_unit: 5, calendar: true, time_zone: Europe/Berln}",
			`f0.yaml:4: descriptors[0].rate_limit.time_zone: "Europe/Berln": unknown time zone (want an IANA name such as Europe/Berlin, or UTC)`},
		{"{unit: month, requests_per_unit: 5, calendar: true, time_zone: Local}",
			`descriptors[0].rate_limit.time_zone: "Local": unknown time zone`},
		{"{unit: month, requests_per_unit: 5, calendar: true, anchor_day: 32}",
			`descriptors[0].rate_limit.anchor_day: 32: must be between 1 and 31`},
		{"{unit: month, requests_per_unit: 5, calendar: true, anchor_day: 0}",
			`descriptors[0].rate_limit.anchor_day: 0: must be between 1 and 31`},
		{"{unit: year, requests_per_unit: 5, calendar: true, anchor_month: 2, anchor_day: 30}",
			`descriptors[0].rate_limit.anchor_day: policy "d.a": calendar day 30: February has at most 29 days`},
		{"{unit: year, requests_per_unit: 5, calendar: true, anchor_month: 13}",
			`descriptors[0].rate_limit.anchor_month: 13: must be between 1 and 12`},
		{"{unit: month, requests_per_unit: 5, calendar: true, anchor_month: 3}",
			`descriptors[0].rate_limit.anchor_month: 3: only a calendar year has an anchor month`},
		{"{unit: week, requests_per_unit: 5, calendar: true, anchor_weekday: caturday}",
			`descriptors[0].rate_limit.anchor_weekday: "caturday": want monday, tuesday, wednesday, thursday, friday, saturday or sunday`},
		{"{unit: week, requests_per_unit: 5, calendar: true, anchor_day: 3}",
			`descriptors[0].rate_limit.anchor_day: 3: a calendar week's anchor is anchor_weekday`},
		{"{unit: month, requests_per_unit: 5, calendar: true, anchor_weekday: monday}",
			`descriptors[0].rate_limit.anchor_weekday: "monday": only a calendar week has an anchor weekday`},
		{"{unit: day, requests_per_unit: 5, calendar: true, anchor_day: 3}",
			`descriptors[0].rate_limit.anchor_day: 3: a calendar day has no anchor day`},
		{"{unit: month, requests_per_unit: 5, algorithm: token-bucket, calendar: true}",
			`f0.yaml:4: descriptors[0].rate_limit.calendar: policy "d.a": calendar month: token-bucket has no windows to align (calendar periods are for fixed-window and sliding-window)`},
		{"{unit: month, requests_per_unit: 5, algorithm: sliding-log, calendar: true}",
			`descriptors[0].rate_limit.calendar: policy "d.a": calendar month: sliding-log has no windows to align`},
		{"{unit: hour, requests_per_unit: 5, calendar: true}",
			`descriptors[0].rate_limit.unit: "hour": a calendar unit is day, week, month or year`},
		{"{period: 720h, requests_per_unit: 5, calendar: true}",
			`descriptors[0].rate_limit.calendar: needs unit: day, week, month or year`},
		{"{unit: month, unit_multiplier: 3, requests_per_unit: 5, calendar: true}",
			`descriptors[0].rate_limit.unit_multiplier: 3: a calendar period is one month`},
		{"{unit: month, requests_per_unit: 5, time_zone: Europe/Berlin}",
			`descriptors[0].rate_limit.time_zone: goes with calendar: true`},
		{"{unit: month, requests_per_unit: 5, calendar: yes please}",
			`descriptors[0].rate_limit.calendar: want true or false`},
		{"{unit: month, requests_per_unit: 0, calendar: true}",
			`descriptors[0].rate_limit.calendar: must not be set when requests_per_unit is 0 (every request is refused)`},
		{"{unlimited: true, calendar: true}",
			`descriptors[0].rate_limit.calendar: must not be set on an unlimited rate_limit`},
	} {
		_, err := Load(fsOf(head + tc.limit + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.limit, err, tc.want)
		}
	}
}
