// SPDX-License-Identifier: Apache-2.0

package calendar_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
)

// A monthly quota that renews on the 15th in Berlin: the window that holds
// March 10 began on February 15 and ends on March 15, local midnight;
// the next one is an hour short of 31 days, for the change to summer time.
func ExampleCalendar_Window() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	p := sluice.Policy{
		Name: "tenant-budget", Algorithm: sluice.FixedWindow,
		Limit: 1_000_000, Period: calendar.Month.Nominal(),
		Calendar: calendar.Calendar{Unit: calendar.Month, Location: berlin, Day: 15},
	}
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	start, end := p.Calendar.Window(time.Date(2026, 3, 10, 12, 0, 0, 0, berlin))
	fmt.Println(start.In(berlin), "to", end.In(berlin))
	start, end = p.Calendar.Window(end)
	fmt.Println(start.In(berlin), "to", end.In(berlin), "is", end.Sub(start))
	// Output:
	// 2026-02-15 00:00:00 +0100 CET to 2026-03-15 00:00:00 +0100 CET
	// 2026-03-15 00:00:00 +0100 CET to 2026-04-15 00:00:00 +0200 CEST is 743h0m0s
}
