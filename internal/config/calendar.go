// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/calendar"
	"gopkg.in/yaml.v3"
)

// Calendar periods. envoyproxy/ratelimit's day, week, month and year are
// fixed lengths (a month is 30 days), and so they stay here unless a
// rate_limit opts in with calendar: true: then its windows are the days,
// weeks, months or years of a wall clock,
//
//	rate_limit:
//	  unit: month
//	  requests_per_unit: 1000000
//	  calendar: true             # opt in; false or absent: fixed lengths
//	  time_zone: Europe/Berlin   # an IANA name; default UTC
//	  anchor_day: 15             # month: the billing day, 1-31 (default 1)
//	                             # year: the day of anchor_month (default 1)
//	  anchor_month: 4            # year only: 1-12 (default 1)
//	  anchor_weekday: sunday     # week only (default monday)
//
// for the window algorithms (fixed-window, the default, and
// sliding-window); see calendar.Calendar.

// rawCalendar is a rate_limit's calendar fields as written.
type rawCalendar struct {
	on                              bool
	onNode                          *yaml.Node
	zone                            string
	zoneNode                        *yaml.Node
	day, month                      int64
	dayNode, monthNode, weekdayNode *yaml.Node
	weekday                         string
}

// fields returns the decoders of the calendar fields, for rateLimit.
func (c *rawCalendar) fields(p *parser) map[string]func(*yaml.Node, string) {
	return map[string]func(*yaml.Node, string){
		"calendar":  func(v *yaml.Node, f string) { c.on, c.onNode = p.boolean(v, f), v },
		"time_zone": func(v *yaml.Node, f string) { c.zone, c.zoneNode = p.str(v, f), v },
		// A value that is not a whole number of 64 bits is reported once,
		// here (with the field's range): the checks of calendar see no
		// anchor.
		"anchor_day": func(v *yaml.Node, f string) {
			if d, ok, over := p.wholeNumber(v, f); ok {
				c.day, c.dayNode = d, v
			} else if over {
				p.inRange(v, f, 0, over, 1, 31, "")
			}
		},
		"anchor_month": func(v *yaml.Node, f string) {
			if m, ok, over := p.wholeNumber(v, f); ok {
				c.month, c.monthNode = m, v
			} else if over {
				p.inRange(v, f, 0, over, 1, 12, "")
			}
		},
		"anchor_weekday": func(v *yaml.Node, f string) { c.weekday, c.weekdayNode = p.str(v, f), v },
	}
}

// calendar compiles r's calendar fields for a rule of the given unit and
// unit_multiplier, reporting errors on field (the rate_limit's path). The
// zero Calendar means fixed lengths.
func (p *parser) calendar(r *rawLimit, field string, at func(*yaml.Node) *yaml.Node) calendar.Calendar {
	c := &r.calendar
	if !c.on {
		for _, x := range []struct {
			name string
			n    *yaml.Node
		}{{"time_zone", c.zoneNode}, {"anchor_day", c.dayNode}, {"anchor_month", c.monthNode}, {"anchor_weekday", c.weekdayNode}} {
			if x.n != nil {
				p.errorf(x.n, field+"."+x.name, "goes with calendar: true")
			}
		}
		return calendar.Calendar{}
	}
	unit, err := calendar.ParseUnit(strings.ToLower(r.unit))
	switch {
	case r.unit == "":
		p.errorf(at(c.onNode), field+".calendar", "needs unit: day, week, month or year")
		return calendar.Calendar{}
	case err != nil:
		p.errorf(at(r.unitNode), field+".unit", "%q: a calendar unit is day, week, month or year", r.unit)
		return calendar.Calendar{}
	case r.multiplierNode != nil && r.multiplier != 1:
		p.errorf(at(r.multiplierNode), field+".unit_multiplier", "%d: a calendar period is one %s", r.multiplier, unit)
		return calendar.Calendar{}
	}
	cal := calendar.Calendar{Unit: unit}
	if c.zoneNode != nil {
		loc, err := location(c.zone)
		if err != nil {
			p.errorf(c.zoneNode, field+".time_zone", "%q: unknown time zone (want an IANA name such as Europe/Berlin, or UTC)", c.zone)
			return calendar.Calendar{}
		}
		cal.Location = loc
	}
	if c.weekdayNode != nil {
		if unit != calendar.Week {
			p.errorf(c.weekdayNode, field+".anchor_weekday", "%q: only a calendar week has an anchor weekday", c.weekday)
			return calendar.Calendar{}
		}
		d, ok := isoWeekday(c.weekday)
		if !ok {
			p.errorf(c.weekdayNode, field+".anchor_weekday", "%q: want monday, tuesday, wednesday, thursday, friday, saturday or sunday", c.weekday)
			return calendar.Calendar{}
		}
		cal.Day = d
	}
	if c.dayNode != nil {
		switch {
		case unit == calendar.Week:
			p.errorf(c.dayNode, field+".anchor_day", "%d: a calendar week's anchor is anchor_weekday", c.day)
			return calendar.Calendar{}
		case unit == calendar.Day:
			p.errorf(c.dayNode, field+".anchor_day", "%d: a calendar day has no anchor day", c.day)
			return calendar.Calendar{}
		case c.day < 1 || c.day > 31:
			p.errorf(c.dayNode, field+".anchor_day", "%d: must be between 1 and 31", c.day)
			return calendar.Calendar{}
		}
		cal.Day = int(c.day)
	}
	if c.monthNode != nil {
		switch {
		case unit != calendar.Year:
			p.errorf(c.monthNode, field+".anchor_month", "%d: only a calendar year has an anchor month", c.month)
			return calendar.Calendar{}
		case c.month < 1 || c.month > 12:
			p.errorf(c.monthNode, field+".anchor_month", "%d: must be between 1 and 12", c.month)
			return calendar.Calendar{}
		}
		cal.Month = time.Month(c.month)
	}
	return cal
}

// isoWeekday returns the ISO number (1 Monday … 7 Sunday) of a weekday's
// English name, in any case.
func isoWeekday(name string) (int, bool) {
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(d.String(), name) {
			if d == time.Sunday {
				return 7, true
			}
			return int(d), true
		}
	}
	return 0, false
}

// locations holds each time zone loaded once, so that rules in the same
// zone hold the same *time.Location and their policies compare equal
// across reloads (a store keys its compiled policies by Policy).
var locations sync.Map // string → *time.Location

// location returns the time zone of an IANA name, loading it once.
func location(name string) (*time.Location, error) {
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	if name == "" || name == "Local" {
		// The host's zone is not a configuration: name one.
		return nil, errLocal
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	l, _ := locations.LoadOrStore(name, loc)
	return l.(*time.Location), nil
}

var errLocal = &time.ParseError{Message: "Local is the host's zone"}
