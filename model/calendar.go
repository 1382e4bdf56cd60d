// SPDX-License-Identifier: Apache-2.0

package model

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/calendar"
)

// Calendar windows. A policy with a calendar.Calendar counts its fixed or
// sliding windows in calendar days, weeks, months or years of a time zone
// (calendar.Calendar.Window draws them) instead of multiples of Period since
// the epoch. The sliding window weighs the previous window by the part of
// the current one still to come, (P−e)/P with P the current window's own
// length, and its RetryAfter and ResetAfter span windows of different
// lengths.
//
// Boundaries are whole seconds, so a store with coarser integer time (Redis
// scripts count microseconds) represents them exactly; a store that cannot
// evaluate time-zone rules is given the boundaries (Model.Window).

// calWindows is a calendar.Calendar ready for evaluation.
type calWindows struct {
	cal calendar.Calendar
	// last is the most recent window found: most decisions fall into it.
	last atomic.Pointer[Window]
}

// Window is a calendar window and its neighbours' edges, in nanoseconds
// since the Unix epoch: the window is [Start, End), the previous one began
// at Prev and the next one ends at Next.
type Window struct {
	Prev, Start, End, Next int64
}

func newCalendar(c calendar.Calendar) *calWindows {
	if c.Unit == 0 {
		return nil
	}
	if c.Location == nil {
		c.Location = time.UTC
	}
	return &calWindows{cal: c}
}

// Window returns the calendar window that holds now (nanoseconds since the
// epoch, clamped to [0, MaxTime]), for a policy with a Calendar; ok is
// false for one without. A store that cannot evaluate time-zone rules
// (a Redis script) is given these boundaries.
func (m *Model) Window(now int64) (w Window, ok bool) {
	if m.cal == nil {
		return Window{}, false
	}
	return m.cal.window(min(max(now, 0), MaxTime)), true
}

// window returns the window that holds t.
func (c *calWindows) window(t int64) Window {
	if w := c.last.Load(); w != nil && w.Start <= t && t < w.End {
		return *w
	}
	start, end := c.cal.Window(time.Unix(0, t))
	prev, _ := c.cal.Window(start.Add(-1))
	_, next := c.cal.Window(end)
	w := &Window{Prev: ns(prev), Start: ns(start), End: ns(end), Next: ns(next)}
	c.last.Store(w)
	return *w
}

// ns returns t in nanoseconds since the epoch, within [0, MaxTime+1].
func ns(t time.Time) int64 {
	if t.Before(time.Unix(0, 0)) {
		return 0
	}
	if t.After(time.Unix(0, MaxTime)) {
		return MaxTime + 1
	}
	return t.UnixNano()
}

// longest returns an upper bound on the length of one window.
func (c *calWindows) longest() int64 {
	// A month or year is at most a day longer than its nominal length,
	// and a DST change moves a midnight by at most two hours.
	return int64(c.cal.Unit.Nominal() + 24*time.Hour + 2*time.Hour)
}
