// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"fmt"
	"time"
)

// CalendarUnit is the length of a calendar period: a day, a week, a month
// or a year, as a wall clock in a time zone counts them.
type CalendarUnit uint8

// The calendar units. The zero CalendarUnit means no calendar.
const (
	CalendarDay CalendarUnit = iota + 1
	CalendarWeek
	CalendarMonth
	CalendarYear
)

var calendarUnits = [...]string{CalendarDay: "day", CalendarWeek: "week", CalendarMonth: "month", CalendarYear: "year"}

// String returns the unit's name: day, week, month or year ("" for none).
func (u CalendarUnit) String() string {
	if int(u) < len(calendarUnits) {
		return calendarUnits[u]
	}
	return fmt.Sprintf("CalendarUnit(%d)", uint8(u))
}

// Nominal returns the fixed length that stands for the unit where one
// length is needed (a Policy's Period, a RateLimit-Policy header): 24 hours,
// 7 days, 30 days, 365 days; 0 for none.
func (u CalendarUnit) Nominal() time.Duration {
	const day = 24 * time.Hour
	switch u {
	case CalendarDay:
		return day
	case CalendarWeek:
		return 7 * day
	case CalendarMonth:
		return 30 * day
	case CalendarYear:
		return 365 * day
	}
	return 0
}

// ParseCalendarUnit returns the unit with the given name.
func ParseCalendarUnit(name string) (CalendarUnit, error) {
	for u, n := range calendarUnits {
		if n != "" && n == name {
			return CalendarUnit(u), nil
		}
	}
	return 0, fmt.Errorf("sluice: unknown calendar unit %q (want day, week, month or year)", name)
}

// Calendar aligns a window policy's windows to a wall clock: each window is
// one calendar day, week, month or year in a time zone, from its anchor to
// the next, however long that is (a day across a DST change is 23 or 25
// hours, February is 28 or 29 days). The zero Calendar means none: windows
// are Period long, aligned to multiples of Period since the Unix epoch.
//
// A Calendar is a comparable value, so Policy stays usable as a map key;
// two policies with calendars in the same zone compare equal only if they
// hold the same *time.Location (load each zone once and share it).
type Calendar struct {
	// Unit is the length of each window. The zero Unit means no calendar.
	Unit CalendarUnit
	// Location is the time zone whose wall clock draws the windows. nil
	// means UTC.
	Location *time.Location
	// Day is the anchor: each window begins at midnight of that day. For
	// CalendarMonth it is the day of the month, 1 to 31 (0 means 1); in a
	// month with fewer days the window begins on the month's last day
	// (a billing day of 31 begins February's window on the 28th or 29th).
	// For CalendarYear it is the day of Month, 1 to that month's longest
	// (0 means 1; February 29 begins on the 28th in other years). For
	// CalendarWeek it is the ISO weekday, 1 (Monday) to 7 (Sunday), 0
	// meaning Monday. For CalendarDay it must be 0.
	Day int
	// Month is, for CalendarYear, the month of the anchor (0 means
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
	case CalendarWeek:
		s += " from " + time.Weekday(day%7).String()
	case CalendarMonth:
		s += fmt.Sprintf(" from day %d", day)
	case CalendarYear:
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

// validate reports the first problem with c on a policy of algorithm a and
// period p, naming the field and its value.
func (c Calendar) validate(a Algorithm, p time.Duration) error {
	if c.Unit == 0 {
		if c != (Calendar{}) {
			return fmt.Errorf("calendar unit: must be set with a time zone or an anchor")
		}
		return nil
	}
	if int(c.Unit) >= len(calendarUnits) {
		return fmt.Errorf("calendar unit %d: want day, week, month or year", uint8(c.Unit))
	}
	if a != FixedWindow && a != SlidingWindow {
		return fmt.Errorf("calendar %s: %s has no windows to align (calendar periods are for fixed-window and sliding-window)", c.Unit, a)
	}
	if p != c.Unit.Nominal() {
		return fmt.Errorf("period %v: a calendar %s's period must be its nominal length, %v", p, c.Unit, c.Unit.Nominal())
	}
	if c.Month != 0 && c.Unit != CalendarYear {
		return fmt.Errorf("calendar month %d: only a calendar year has an anchor month", int(c.Month))
	}
	switch c.Unit {
	case CalendarDay:
		if c.Day != 0 {
			return fmt.Errorf("calendar day %d: a calendar day has no anchor day", c.Day)
		}
	case CalendarWeek:
		if c.Day < 0 || c.Day > 7 {
			return fmt.Errorf("calendar day %d: a week's anchor is an ISO weekday, 1 (Monday) to 7 (Sunday)", c.Day)
		}
	case CalendarMonth:
		if c.Day < 0 || c.Day > 31 {
			return fmt.Errorf("calendar day %d: a month's anchor day must be between 1 and 31", c.Day)
		}
	case CalendarYear:
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
