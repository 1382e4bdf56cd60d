// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
	"github.com/sluicehq/sluice/model"
)

// testCalendar runs calendar windows in Europe/Berlin (day, month on the
// 1st, month on billing day 31, a week from Sunday) on fixed-window and
// sliding-window, from January to November 2026: across a February, the
// March day of 23 hours and the October day of 25. At every window
// boundary, one nanosecond before it and after it, and in mid-window, the
// store's decisions equal the model's; the last key's state expires
// exactly at its window's end; charges land in the calendar window, and a
// TakeAll batch joins a calendar month and a per-second limit.
func testCalendar(t *testing.T, newHarness func(t *testing.T) Harness) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("storetest: the calendar rows need the time zone database: %v", err)
	}
	in := func(mo time.Month, d int) int64 { return time.Date(2026, mo, d, 0, 0, 0, 0, berlin).UnixNano() }
	cals := []struct {
		cal      calendar.Calendar
		from, to int64
	}{
		{calendar.Calendar{Unit: calendar.Month, Location: berlin}, in(1, 20), in(11, 5)},
		{calendar.Calendar{Unit: calendar.Month, Location: berlin, Day: 31}, in(1, 20), in(11, 5)},
		{calendar.Calendar{Unit: calendar.Day, Location: berlin}, in(3, 27), in(4, 1)},
		{calendar.Calendar{Unit: calendar.Day, Location: berlin}, in(10, 23), in(10, 28)},
		{calendar.Calendar{Unit: calendar.Week, Location: berlin, Day: 7}, in(3, 10), in(4, 20)},
	}
	costs := []int64{3, 0, 4, 5, 1, 2, 0, 7}
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow} {
		for i, c := range cals {
			t.Run(fmt.Sprintf("%s/%s", alg, c.cal), func(t *testing.T) {
				p := sluice.Policy{Name: fmt.Sprintf("cal-%d", i), Algorithm: alg, Limit: 10, Period: c.cal.Unit.Nominal(), Calendar: c.cal}
				m, err := model.New(p)
				if err != nil {
					t.Fatal(err)
				}
				r := newRig(t, newHarness, c.from)
				k := 0
				for at := c.from; at < c.to; {
					w, _ := m.Window(at)
					for _, t := range []int64{w.Start + (w.End-w.Start)/2, w.End - 1, w.End, w.End + 1} {
						if t < at {
							continue
						}
						r.at(t)
						r.check(p, "tenant", costs[k%len(costs)])
						k++
					}
					at = w.End + 2
				}
				r.at(r.now + 1)
				r.check(p, "tenant", 1)
				checkExpiry(r, p, "tenant")
			})
		}
	}
	// Charges count in the calendar window that holds now, as admissions
	// do: a budget charged past its limit refuses until the window's end
	// (fixed) or until the debt has weighed out (sliding).
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow} {
		for i, c := range cals[:3] {
			t.Run(fmt.Sprintf("Charge/%s/%s", alg, c.cal), func(t *testing.T) {
				p := sluice.Policy{Name: fmt.Sprintf("cal-charge-%d", i), Algorithm: alg, Limit: 10, Period: c.cal.Unit.Nominal(), Calendar: c.cal}
				m, err := model.New(p)
				if err != nil {
					t.Fatal(err)
				}
				r := newRig(t, newHarness, c.from)
				charges := []int64{6, 0, 7, 3, 12, 1}
				k := 0
				for at := c.from; at < c.to; {
					w, _ := m.Window(at)
					for _, t := range []int64{w.Start + (w.End-w.Start)/3, w.End - 1, w.End} {
						if t < at {
							continue
						}
						r.at(t)
						r.charge(p, "tenant", charges[k%len(charges)])
						r.check(p, "tenant", 1)
						r.peek(p, "tenant")
						k++
					}
					at = w.End + 2
				}
				checkExpiry(r, p, "tenant")
			})
		}
	}
	t.Run("TakeAll", func(t *testing.T) {
		month := sluice.Policy{Name: "cal-budget", Algorithm: sluice.FixedWindow, Limit: 5, Period: calendar.Month.Nominal(),
			Calendar: calendar.Calendar{Unit: calendar.Month, Location: berlin, Day: 15}}
		second := sluice.Policy{Name: "cal-rate", Algorithm: sluice.TokenBucket, Limit: 2, Period: time.Second}
		r := newRig(t, newHarness, in(2, 14))
		for i, at := range []time.Duration{0, 0, 0, time.Second, time.Second, 2 * time.Second, 24 * time.Hour, 24*time.Hour + time.Second} {
			r.at(in(2, 14) + int64(at))
			r.checkAll([]sluice.Request{req(second, "t", 1), req(month, "t", int64(1+i%2))})
		}
	})
}
