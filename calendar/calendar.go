// SPDX-License-Identifier: Apache-2.0

// Package calendar draws rate-limit windows on a wall clock: calendar days,
// weeks, months or years in a time zone (a monthly quota that renews on a
// tenant's billing day), for sluice.Policy.Calendar.
package calendar

import (
	"fmt"
	"time"
)

// Unit is the length of a calendar period: a day, a week, a month
// or a year, as a wall clock in a time zone counts them.
type Unit uint8

// The calendar units. The zero Unit means no calendar.
const (
	Day Unit = iota + 1
	Week
	Month
	Year
)

var unitNames = [...]string{Day: "day", Week: "week", Month: "month", Year: "year"}

// String returns the unit's name: day, week, month or year ("" for none).
func (u Unit) String() string {
	if int(u) < len(unitNames) {
		return unitNames[u]
	}
	return fmt.Sprintf("calendar.Unit(%d)", uint8(u))
}

// Nominal returns the fixed length that stands for the unit where one
// length is needed (a Policy's Period, a RateLimit-Policy header): 24 hours,
// 7 days, 30 days, 365 days; 0 for none.
func (u Unit) Nominal() time.Duration {
	const day = 24 * time.Hour
	switch u {
	case Day:
		return day
	case Week:
		return 7 * day
	case Month:
		return 30 * day
	case Year:
		return 365 * day
	}
	return 0
}

// ParseUnit returns the unit with the given name.
func ParseUnit(name string) (Unit, error) {
	for u, n := range unitNames {
		if n != "" && n == name {
			return Unit(u), nil
		}
	}
	return 0, fmt.Errorf("calendar: unknown unit %q (want day, week, month or year)", name)
}

// Calendar aligns a window policy's windows to a wall clock: each window is
// one calendar day, week, month or year in a time zone, from its anchor to
// the next, however long that is (a day across a DST change is 23 or 25
// hours, February is 28 or 29 days). The zero Calendar means none: windows
// are Period long, aligned to multiples of Period since the Unix epoch.
//
// A Calendar is a comparable value, so a sluice.Policy stays usable as a map key;
// two policies with calendars in the same zone compare equal only if they
// hold the same *time.Location (load each zone once and share it).
type Calendar struct {
	// Unit is the length of each window. The zero Unit means no calendar.
	Unit Unit
	// Location is the time zone whose wall clock draws the windows. nil
	// means UTC.
	Location *time.Location
	// Day is the anchor: each window begins at midnight of that day. For
	// Month it is the day of the month, 1 to 31 (0 means 1); in a
	// month with fewer days the window begins on the month's last day
	// (a billing day of 31 begins February's window on the 28th or 29th).
	// For Year it is the day of Month, 1 to that month's longest
	// (0 means 1; February 29 begins on the 28th in other years). For
	// Week it is the ISO weekday, 1 (Monday) to 7 (Sunday), 0
	// meaning Monday. For Day it must be 0.
	Day int
	// Month is, for Year, the month of the anchor (0 means
	// January). For the other units it must be 0.
	Month time.Month
}

// String formats c as "month from day 15 in Europe/Berlin".
func (c Calendar) String() string {
	if c.Unit == 0 {
		return ""
	}
	s := c.Unit.String()
	day := max(c.Day, 1)
	switch c.Unit {
	case Week:
		s += " from " + time.Weekday(day%7).String()
	case Month:
		s += fmt.Sprintf(" from day %d", day)
	case Year:
		s += fmt.Sprintf(" from %s %d", time.Month(max(int(c.Month), 1)), day)
	}
	return s + " in " + c.zone()
}

// zone names c's time zone.
func (c Calendar) zone() string {
	if c.Location == nil {
		return "UTC"
	}
	return c.Location.String()
}

// Validate reports the first problem with c, naming the field and its
// value: a zone or an anchor without a Unit, an unknown Unit, or an anchor
// the Unit does not have. The zero Calendar is valid. (sluice.Policy's
// Validate also checks that the policy is a window kind whose Period is
// the Unit's Nominal length.)
func (c Calendar) Validate() error {
	if c.Unit == 0 {
		if c != (Calendar{}) {
			return fmt.Errorf("calendar unit: must be set with a time zone or an anchor")
		}
		return nil
	}
	if int(c.Unit) >= len(unitNames) {
		return fmt.Errorf("calendar unit %d: want day, week, month or year", uint8(c.Unit))
	}
	if c.Month != 0 && c.Unit != Year {
		return fmt.Errorf("calendar month %d: only a calendar year has an anchor month", int(c.Month))
	}
	switch c.Unit {
	case Day:
		if c.Day != 0 {
			return fmt.Errorf("calendar day %d: a calendar day has no anchor day", c.Day)
		}
	case Week:
		if c.Day < 0 || c.Day > 7 {
			return fmt.Errorf("calendar day %d: a week's anchor is an ISO weekday, 1 (Monday) to 7 (Sunday)", c.Day)
		}
	case Month:
		if c.Day < 0 || c.Day > 31 {
			return fmt.Errorf("calendar day %d: a month's anchor day must be between 1 and 31", c.Day)
		}
	case Year:
		if c.Month < 0 || c.Month > 12 {
			return fmt.Errorf("calendar month %d: must be between 1 and 12", int(c.Month))
		}
		// The longest the anchor month gets (a leap year's February).
		m := max(c.Month, time.January)
		longest := time.Date(2000, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
		if c.Day < 0 || c.Day > longest {
			return fmt.Errorf("calendar day %d: %s has at most %d days", c.Day, m, longest)
		}
	}
	return nil
}

// Window returns the calendar window that holds t: [start, end), from
// midnight in c's zone on the anchor date to the next one. Consecutive
// windows share their boundary, so the windows tile time exactly, whatever
// a DST change does to a day's length; a midnight that a zone skips or
// repeats is resolved the one way time.Date resolves it. For the zero
// Calendar it returns t, t.
func (c Calendar) Window(t time.Time) (start, end time.Time) {
	if c.Unit == 0 {
		return t, t
	}
	if c.Location == nil {
		c.Location = time.UTC
	}
	k := c.index(t)
	// index reads the wall clock and bound is the authority: they agree
	// but where a DST change makes a midnight ambiguous, so step until
	// they do.
	for c.bound(k).After(t) {
		k = c.step(k, -1)
	}
	for next := c.bound(c.step(k, 1)); !next.After(t); next = c.bound(c.step(k, 1)) {
		k = c.step(k, 1)
	}
	return c.bound(k), c.bound(c.step(k, 1))
}

// Windows are numbered: a day by its date (days since 1970-01-01), a week
// by the date of its anchor weekday, a month by year×12 + month−1, a year
// by its year. Window k begins at bound(k).

// step returns the number of the window n windows after window k.
func (c Calendar) step(k, n int64) int64 {
	if c.Unit == Week {
		return k + 7*n
	}
	return k + n
}

// index returns the number of the window whose wall-clock dates hold t.
func (c Calendar) index(t time.Time) int64 {
	y, mo, d := t.In(c.Location).Date()
	day := max(c.Day, 1)
	switch c.Unit {
	case Day:
		return dayNumber(y, mo, d)
	case Week:
		dn := dayNumber(y, mo, d)
		iso := (dn+3)%7 + 1 // 1970-01-01 was a Thursday, ISO 4
		if iso < 1 {
			iso += 7
		}
		return dn - (iso-int64(day)+7)%7
	case Month:
		k := int64(y)*12 + int64(mo-1)
		if d < anchorDay(y, mo, day) {
			k--
		}
		return k
	}
	am := max(c.Month, time.January)
	if mo < am || mo == am && d < anchorDay(y, mo, day) {
		y--
	}
	return int64(y)
}

// bound returns the instant window k begins: midnight on its anchor date.
func (c Calendar) bound(k int64) time.Time {
	switch c.Unit {
	case Day, Week:
		return time.Date(1970, time.January, 1+int(k), 0, 0, 0, 0, c.Location)
	case Month:
		y := k / 12
		if k%12 < 0 {
			y--
		}
		mo := time.Month(k-y*12) + 1
		return time.Date(int(y), mo, anchorDay(int(y), mo, max(c.Day, 1)), 0, 0, 0, 0, c.Location)
	}
	am := max(c.Month, time.January)
	return time.Date(int(k), am, anchorDay(int(k), am, max(c.Day, 1)), 0, 0, 0, 0, c.Location)
}

// anchorDay returns the day of month mo of year y that a window anchored
// on day begins: day, or the month's last day if it has fewer.
func anchorDay(y int, mo time.Month, day int) int {
	if day <= 28 {
		return day
	}
	return min(day, time.Date(y, mo+1, 0, 0, 0, 0, 0, time.UTC).Day())
}

// dayNumber returns the days from 1970-01-01 to the date.
func dayNumber(y int, mo time.Month, d int) int64 {
	s := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Unix()
	q := s / 86400
	if s%86400 < 0 {
		q--
	}
	return q
}
