// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"strconv"
	"time"

	"github.com/sluicehq/sluice/calendar"
)

// Calendar windows on Redis. The script cannot evaluate time-zone rules, so
// Go sends each calendar request's window (model.Window: its start and end,
// the previous window's start and the next one's end) for the instant Go
// expects the script to decide at: the store's clock when it has one, else
// this process's clock as a guess of Redis TIME. The script checks that the
// window holds the instant it decides at (Redis TIME, or the stored window's
// start if that is later); if one does not (the guess was on the other side
// of a boundary: a call crossing midnight, or clocks that disagree), it
// writes nothing and answers "2", and take sends the windows for the instant
// the script reported and the states it saw, at most maxCalendarTries times
// in all. The decision is the model's on the state the script saw, as for
// every request, so both sides always agree on the window.

// maxCalendarTries bounds the calls one batch makes when its calendar
// windows miss the script's clock: the second call is given the windows of
// the script's own instant, so only a boundary passing between two calls
// makes a third.
const maxCalendarTries = 3

// calendarTag is what an unnamed calendar policy adds to its tag, so that it
// shares no state with the same policy in fixed-length windows.
func calendarTag(c calendar.Calendar) string {
	if c.Unit == 0 {
		return ""
	}
	zone := "UTC"
	if c.Location != nil {
		zone = c.Location.String()
	}
	return ":c" + c.Unit.String() + ":" + escape(zone) + ":" + strconv.Itoa(c.Day) + ":" + strconv.Itoa(int(c.Month))
}

// calendarGuess returns the instant to draw calendar windows for before the
// script has said which it uses.
func (s *Store) calendarGuess() int64 {
	if s.clock != nil {
		return s.clock.Now().UnixNano()
	}
	if s.guessClock != nil {
		return s.guessClock()
	}
	return time.Now().UnixNano()
}

// setWindow writes into f, one request's 9 script fields, the calendar kind
// and the window of c's calendar that holds at.
func setWindow(f []string, c *compiled, at int64) {
	w, _ := c.model.Window(at)
	f[0] = c.calKind
	f[4] = strconv.FormatInt(w.Start, 10)
	f[5] = strconv.FormatInt(w.End, 10)
	f[6] = strconv.FormatInt(w.Prev, 10)
	f[7] = strconv.FormatInt(w.Next, 10)
}
