// SPDX-License-Identifier: Apache-2.0

package model

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Calendar windows. A policy with a sluice.Calendar counts its fixed or
// sliding windows in calendar days, weeks, months or years of a time zone
// instead of multiples of Period since the epoch. The windows are numbered
// (a day by its date, a week by the date of its anchor weekday, a month by
// year×12+month, a year by its year) and window k is [bound(k), bound(k+1)):
// bound is the instant of midnight, in the zone, on the window's anchor
// date. Consecutive windows share the one instant bound computes, so they
// tile time exactly whatever the zone's rules do to a day's length (time.Date
// resolves a midnight that a DST change skips or repeats the one way it
// always does). The sliding window weighs the previous window by the part of
// the current one still to come, (P−e)/P with P the current window's own
// length.
//
// Boundaries are whole seconds, so a store with coarser integer time (Redis
// scripts count microseconds) represents them exactly; stores that cannot
// evaluate time-zone rules are given the boundaries (Window).

// calendar is a sluice.Calendar ready for evaluation.
type calendar struct {
	unit  sluice.CalendarUnit
	loc   *time.Location
	day   int        // the anchor day (month, year) or ISO weekday (week), 1-based
	month time.Month // the anchor month (year)
	// last is the most recent window found: most decisions fall into it.
	last atomic.Pointer[Window]
}

// Window is a calendar window and its neighbours' edges, in nanoseconds
// since the Unix epoch: the window is [Start, End), the previous one began
// at Prev and the next one ends at Next.
type Window struct {
	Prev, Start, End, Next int64
}

func newCalendar(c sluice.Calendar) *calendar {
	if c.Unit == 0 {
		return nil
	}
	cal := &calendar{unit: c.Unit, loc: c.Location, day: max(c.Day, 1), month: max(c.Month, time.January)}
	if cal.loc == nil {
		cal.loc = time.UTC
	}
	return cal
}

// Window returns the calendar window that holds now (nanoseconds since the
// epoch, clamped to [0, MaxTime]), for a policy with a Calendar; ok is
// false for one without. A store that cannot evaluate time-zone rules
// (a Redis script) is given these boundaries.
func (m *Model) Window(now int64) (w Window, ok bool) {
	if m.cal == nil {
		return Window{}, false
	}
	return m.cal.window(min(max(now, 0), sluice.MaxTime)), true
}

// window returns the window that holds t.
func (c *calendar) window(t int64) Window {
	if w := c.last.Load(); w != nil && w.Start <= t && t < w.End {
		return *w
	}
	k := c.index(t)
	// index reads the wall clock; bound is the authority. They agree but
	// for an instant a DST change makes ambiguous: step until they do.
	for c.bound(k) > t {
		k = c.step(k, -1)
	}
	for c.bound(c.step(k, 1)) <= t {
		k = c.step(k, 1)
	}
	w := &Window{Prev: c.bound(c.step(k, -1)), Start: c.bound(k), End: c.bound(c.step(k, 1)), Next: c.bound(c.step(k, 2))}
	c.last.Store(w)
	return *w
}

// step returns the number of the window n windows after window k.
func (c *calendar) step(k int64, n int64) int64 {
	if c.unit == sluice.CalendarWeek {
		return k + 7*n
	}
	return k + n
}

// index returns the number of the window whose wall-clock dates hold t.
func (c *calendar) index(t int64) int64 {
	y, mo, d := time.Unix(0, t).In(c.loc).Date()
	switch c.unit {
	case sluice.CalendarDay:
		return dayNumber(y, mo, d)
	case sluice.CalendarWeek:
		dn := dayNumber(y, mo, d)
		iso := (dn+3)%7 + 1 // 1970-01-01 was a Thursday, ISO 4
		if iso < 1 {
			iso += 7
		}
		return dn - (iso-int64(c.day)+7)%7
	case sluice.CalendarMonth:
		k := int64(y)*12 + int64(mo-1)
		if d < anchor(y, mo, c.day) {
			k--
		}
		return k
	}
	if mo < c.month || mo == c.month && d < anchor(y, mo, c.day) {
		y--
	}
	return int64(y)
}

// bound returns the instant window k begins: midnight on its anchor date.
func (c *calendar) bound(k int64) int64 {
	var t time.Time
	switch c.unit {
	case sluice.CalendarDay, sluice.CalendarWeek:
		t = time.Date(1970, time.January, 1+int(k), 0, 0, 0, 0, c.loc)
	case sluice.CalendarMonth:
		y, mo := int(floorDiv(k, 12)), time.Month(k-floorDiv(k, 12)*12+1)
		t = time.Date(y, mo, anchor(y, mo, c.day), 0, 0, 0, 0, c.loc)
	default:
		y := int(k)
		t = time.Date(y, c.month, anchor(y, c.month, c.day), 0, 0, 0, 0, c.loc)
	}
	return min(max(t.UnixNano(), 0), sluice.MaxTime+1)
}

// longest returns an upper bound on the length of one window.
func (c *calendar) longest() int64 {
	// A DST change moves a midnight by at most two hours.
	return int64(c.unit.Nominal() + 24*time.Hour + 2*time.Hour)
}

// anchor returns the day of month mo of year y that a window anchored on
// day begins: day, or the month's last day if it has fewer.
func anchor(y int, mo time.Month, day int) int {
	if day <= 28 {
		return day
	}
	return min(day, time.Date(y, mo+1, 0, 0, 0, 0, 0, time.UTC).Day())
}

// dayNumber returns the days from 1970-01-01 to the date.
func dayNumber(y int, mo time.Month, d int) int64 {
	return floorDiv(time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Unix(), 86400)
}
