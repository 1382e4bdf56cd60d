// SPDX-License-Identifier: Apache-2.0

package model

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func monthly(loc *time.Location, alg sluice.Algorithm, limit int64, day int) sluice.Policy {
	return sluice.Policy{Algorithm: alg, Limit: limit, Period: calendar.Month.Nominal(),
		Calendar: calendar.Calendar{Unit: calendar.Month, Location: loc, Day: day}}
}

// TestCalendarWindows pins the windows to the wall clock: months of 28, 29
// and 31 days, a March that loses an hour and an October that gains one in
// Berlin, anchor days past a month's end, weeks, days of 23 and 25 hours,
// and a year anchored on February 29.
func TestCalendarWindows(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	d := func(y int, mo time.Month, day, h int) time.Time { return time.Date(y, mo, day, h, 0, 0, 0, berlin) }
	cases := []struct {
		cal        calendar.Calendar
		at         time.Time
		start, end time.Time
		length     time.Duration
	}{
		{calendar.Calendar{Unit: calendar.Month, Location: berlin}, d(2026, 2, 14, 12), d(2026, 2, 1, 0), d(2026, 3, 1, 0), 28 * 24 * time.Hour},
		{calendar.Calendar{Unit: calendar.Month, Location: berlin}, d(2028, 2, 29, 23), d(2028, 2, 1, 0), d(2028, 3, 1, 0), 29 * 24 * time.Hour},
		{calendar.Calendar{Unit: calendar.Month, Location: berlin}, d(2026, 3, 29, 3), d(2026, 3, 1, 0), d(2026, 4, 1, 0), 31*24*time.Hour - time.Hour},
		{calendar.Calendar{Unit: calendar.Month, Location: berlin}, d(2026, 10, 31, 23), d(2026, 10, 1, 0), d(2026, 11, 1, 0), 31*24*time.Hour + time.Hour},
		// Billing day 15: the window that holds March 10 began February 15.
		{calendar.Calendar{Unit: calendar.Month, Location: berlin, Day: 15}, d(2026, 3, 10, 0), d(2026, 2, 15, 0), d(2026, 3, 15, 0), 28 * 24 * time.Hour},
		// Billing day 31: February's window begins on its last day.
		{calendar.Calendar{Unit: calendar.Month, Location: berlin, Day: 31}, d(2026, 3, 1, 0), d(2026, 2, 28, 0), d(2026, 3, 31, 0), 31*24*time.Hour - time.Hour},
		{calendar.Calendar{Unit: calendar.Month, Location: berlin, Day: 31}, d(2026, 2, 27, 0), d(2026, 1, 31, 0), d(2026, 2, 28, 0), 28 * 24 * time.Hour},
		{calendar.Calendar{Unit: calendar.Day, Location: berlin}, d(2026, 3, 29, 12), d(2026, 3, 29, 0), d(2026, 3, 30, 0), 23 * time.Hour},
		{calendar.Calendar{Unit: calendar.Day, Location: berlin}, d(2026, 10, 25, 1), d(2026, 10, 25, 0), d(2026, 10, 26, 0), 25 * time.Hour},
		// Weeks from Monday (2026-03-23 is a Monday) and from Sunday.
		{calendar.Calendar{Unit: calendar.Week, Location: berlin}, d(2026, 3, 29, 12), d(2026, 3, 23, 0), d(2026, 3, 30, 0), 7*24*time.Hour - time.Hour},
		{calendar.Calendar{Unit: calendar.Week, Location: berlin, Day: 7}, d(2026, 3, 29, 12), d(2026, 3, 29, 0), d(2026, 4, 5, 0), 7*24*time.Hour - time.Hour},
		{calendar.Calendar{Unit: calendar.Year, Location: berlin, Month: time.February, Day: 29}, d(2027, 1, 5, 0), d(2026, 2, 28, 0), d(2027, 2, 28, 0), 365 * 24 * time.Hour},
		{calendar.Calendar{Unit: calendar.Year, Location: berlin, Month: time.February, Day: 29}, d(2028, 2, 29, 0), d(2028, 2, 29, 0), d(2029, 2, 28, 0), 365 * 24 * time.Hour},
		{calendar.Calendar{Unit: calendar.Year}, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), 365 * 24 * time.Hour},
	}
	for _, c := range cases {
		m, err := New(sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: c.cal.Unit.Nominal(), Calendar: c.cal})
		if err != nil {
			t.Fatal(err)
		}
		w, ok := m.Window(c.at.UnixNano())
		if !ok || w.Start != c.start.UnixNano() || w.End != c.end.UnixNano() || time.Duration(w.End-w.Start) != c.length {
			t.Errorf("%v at %v: window [%v, %v) (%v), want [%v, %v) (%v)", c.cal, c.at,
				time.Unix(0, w.Start).In(berlin), time.Unix(0, w.End).In(berlin), time.Duration(w.End-w.Start), c.start, c.end, c.length)
		}
	}
}

// TestCalendarTiles checks, in zones whose DST changes skip or repeat
// midnight (Havana, Santiago, Beirut) and in others, that the windows of
// every unit tile time: each instant is in exactly one window, and each
// window ends where the next begins.
func TestCalendarTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"UTC", "Europe/Berlin", "America/Havana", "America/Santiago", "Asia/Beirut", "Australia/Lord_Howe", "Pacific/Apia"} {
		loc := zone(t, name)
		for u := calendar.Day; u <= calendar.Year; u++ {
			for _, day := range []int{0, 5, 29, 31} {
				c := calendar.Calendar{Unit: u, Location: loc, Day: day}
				switch {
				case u == calendar.Day:
					c.Day = 0
				case u == calendar.Week:
					c.Day = day % 8
				case u == calendar.Year:
					c.Month = time.Month(1 + day%12)
					c.Day = min(day, 28)
				}
				m, err := New(sluice.Policy{Algorithm: sluice.SlidingWindow, Limit: 1, Period: u.Nominal(), Calendar: c})
				if err != nil {
					t.Fatal(err)
				}
				for range 300 {
					at := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() + rng.Int64N(int64(40*365*24*time.Hour))
					w, _ := m.Window(at)
					if w.Start > at || at >= w.End || w.Prev >= w.Start || w.End >= w.Next {
						t.Fatalf("%v at %v: window %+v does not hold it", c, time.Unix(0, at).In(loc), w)
					}
					before, _ := m.Window(w.Start - 1)
					after, _ := m.Window(w.End)
					if before.End != w.Start || before.Start != w.Prev || after.Start != w.End || after.End != w.Next {
						t.Fatalf("%v at %v: windows do not tile: %+v, %+v, %+v", c, time.Unix(0, at).In(loc), before, w, after)
					}
					if w.End-w.Start > m.cal.longest() || w.Start%int64(time.Second) != 0 {
						t.Fatalf("%v: window %+v longer than %v or not whole seconds", c, w, m.cal.longest())
					}
				}
			}
		}
	}
}

// TestCalendarMonthSteps is a fixed-window month in Berlin, 3 per month,
// across a February (28 days) and the March that loses an hour: the quota
// comes back exactly at local midnight on the 1st, and ResetAfter and
// RetryAfter count the real hours to it.
func TestCalendarMonthSteps(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	p := monthly(berlin, sluice.FixedWindow, 3, 0)
	t0 := time.Date(2026, 2, 27, 12, 0, 0, 0, berlin).UnixNano()
	h := time.Hour
	toMarch := 36 * h                  // Feb 27 12:00 CET to Mar 1 00:00 CET
	toApril := toMarch + 31*24*h - 1*h // March in Berlin: 743 hours
	runSteps(t, p, t0, []step{
		{0, 2, true, 1, -1, toMarch, 0},
		{h, 1, true, 0, -1, toMarch - h, 0},
		{2 * h, 1, false, 0, toMarch - 2*h, toMarch - 2*h, 0},
		{toMarch - 1, 0, false, 0, 1, 1, 0},
		{toMarch, 3, true, 0, -1, toApril - toMarch, 0},
		{toMarch + 28*24*h + 3*h, 1, false, 0, toApril - toMarch - 28*24*h - 3*h, -1, 0}, // Mar 29 03:00 CEST, after the change
		{toApril, 1, true, 2, -1, 30 * 24 * h, 0},
	})
}

// TestCalendarSlidingNeverEarly drives a calendar sliding window in Berlin
// across a February and the DST change in March with random requests and
// checks every rejection's RetryAfter against the model itself: the same
// request is refused one nanosecond earlier and admitted then (tight and
// never too early), and ResetAfter is when the state expires.
func TestCalendarSlidingNeverEarly(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	rng := rand.New(rand.NewPCG(3, 4))
	for _, day := range []int{0, 15, 31} {
		m, err := New(monthly(berlin, sluice.SlidingWindow, 100, day))
		if err != nil {
			t.Fatal(err)
		}
		var s State
		now := time.Date(2026, 1, 20, 0, 0, 0, 0, berlin).UnixNano()
		for range 3000 {
			now += rng.Int64N(int64(30 * time.Hour))
			cost := rng.Int64N(40)
			next, d := m.Take(s, now, cost)
			if d.Allowed {
				if cost > 0 {
					if exp := m.ExpiresAt(next); exp != now+int64(d.ResetAfter) {
						t.Fatalf("day %d at %v: ResetAfter %v but expires at %v", day, time.Unix(0, now).In(berlin), d.ResetAfter, time.Unix(0, exp).In(berlin))
					}
				}
				s = next
				continue
			}
			r := int64(d.RetryAfter)
			if _, e := m.Take(s, now+r-1, cost); r > 0 && e.Allowed {
				t.Fatalf("day %d at %v cost %d: RetryAfter %v is not tight", day, time.Unix(0, now).In(berlin), cost, d.RetryAfter)
			}
			if _, e := m.Take(s, now+r, cost); !e.Allowed {
				t.Fatalf("day %d at %v cost %d: refused again after RetryAfter %v", day, time.Unix(0, now).In(berlin), cost, d.RetryAfter)
			}
		}
	}
}

// TestCalendarSlidingWeighs checks the previous month's weight against the
// current month's own length: 15 days into a 30-day April, half of March
// still counts.
func TestCalendarSlidingWeighs(t *testing.T) {
	m, err := New(monthly(time.UTC, sluice.SlidingWindow, 100, 0))
	if err != nil {
		t.Fatal(err)
	}
	march := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC).UnixNano()
	s, d := m.Take(State{}, march, 60)
	if !d.Allowed {
		t.Fatal(d)
	}
	mid := time.Date(2026, 4, 16, 0, 0, 0, 0, time.UTC).UnixNano()
	if _, d = m.Take(s, mid, 0); d.Remaining != 70 {
		t.Errorf("half way through April: remaining %d, want 100 - 60/2 = 70", d.Remaining)
	}
	if want := time.Duration(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano() - mid); d.ResetAfter != want {
		t.Errorf("reset after %v, want %v (April's end)", d.ResetAfter, want)
	}
}

func TestCalendarValidate(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	month := calendar.Month.Nominal()
	cases := []struct {
		p    sluice.Policy
		want string
	}{
		{sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 1, Period: month, Calendar: calendar.Calendar{Unit: calendar.Month}},
			`sluice: policy "b": calendar month: token-bucket has no windows to align (calendar periods are for fixed-window and sliding-window)`},
		{sluice.Policy{Name: "l", Algorithm: sluice.SlidingLog, Limit: 1, Period: month, Calendar: calendar.Calendar{Unit: calendar.Month}},
			`sluice: policy "l": calendar month: sliding-log has no windows to align (calendar periods are for fixed-window and sliding-window)`},
		{sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour, Calendar: calendar.Calendar{Unit: calendar.Month}},
			`sluice: policy "p": period 1h0m0s: a calendar month's period must be its nominal length, 720h0m0s`},
		{sluice.Policy{Name: "d", Algorithm: sluice.FixedWindow, Limit: 1, Period: month, Calendar: calendar.Calendar{Unit: calendar.Month, Location: berlin, Day: 32}},
			`sluice: policy "d": calendar day 32: a month's anchor day must be between 1 and 31`},
		{sluice.Policy{Name: "y", Algorithm: sluice.FixedWindow, Limit: 1, Period: calendar.Year.Nominal(), Calendar: calendar.Calendar{Unit: calendar.Year, Month: time.April, Day: 31}},
			`sluice: policy "y": calendar day 31: April has at most 30 days`},
		{sluice.Policy{Name: "w", Algorithm: sluice.FixedWindow, Limit: 1, Period: calendar.Week.Nominal(), Calendar: calendar.Calendar{Unit: calendar.Week, Day: 8}},
			`sluice: policy "w": calendar day 8: a week's anchor is an ISO weekday, 1 (Monday) to 7 (Sunday)`},
		{sluice.Policy{Name: "z", Algorithm: sluice.FixedWindow, Limit: 1, Period: month, Calendar: calendar.Calendar{Location: berlin}},
			`sluice: policy "z": calendar unit: must be set with a time zone or an anchor`},
	}
	for _, c := range cases {
		if _, err := New(c.p); err == nil || err.Error() != c.want {
			t.Errorf("New(%v): %v, want %s", c.p, err, c.want)
		}
	}
}

// BenchmarkCalendarTake is BenchmarkModelTake for calendar months in
// Berlin: the window is cached, so a decision inside it costs a compare
// more and allocates nothing.
func BenchmarkCalendarTake(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow} {
		b.Run("alg="+string(alg), func(b *testing.B) {
			m, err := New(monthly(berlin, alg, 100, 15))
			if err != nil {
				b.Fatal(err)
			}
			var s State
			now := time.Date(2026, 3, 20, 0, 0, 0, 0, berlin).UnixNano()
			b.ReportAllocs()
			for b.Loop() {
				now += 1000
				s, _ = m.Take(s, now, 1)
			}
		})
	}
}

// FuzzCalendar checks the calendar window models against an exact
// reference: the window from calendar.Calendar.Window (whose tiling
// TestCalendarTiles checks), and admission computed in rationals from the
// semantics: cur + c + prev·(P−e)/P ≤ Limit for sliding-window with P the
// current window's own length, cur + c ≤ Limit for fixed-window. Each
// rejection's RetryAfter is tight and never early.
func FuzzCalendar(f *testing.F) {
	f.Add(uint8(0), uint8(3), int64(7), []byte{1, 9, 200, 3, 255, 40, 17, 80})
	f.Add(uint8(1), uint8(2), int64(3), []byte{250, 1, 250, 2, 250, 3, 7, 7})
	zones := []string{"Europe/Berlin", "America/Santiago", "Australia/Lord_Howe"}
	locs := make([]*time.Location, len(zones))
	for i, z := range zones {
		l, err := time.LoadLocation(z)
		if err != nil {
			f.Fatal(err)
		}
		locs[i] = l
	}
	f.Fuzz(func(t *testing.T, which, unit uint8, limit int64, ops []byte) {
		alg := []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow}[which%2]
		u := calendar.Unit(1 + unit%4)
		limit = 1 + (limit&0xffff)%50
		c := calendar.Calendar{Unit: u, Location: locs[int(which/2)%len(locs)]}
		if u == calendar.Month {
			c.Day = 1 + int(unit/4)%31
		}
		m, err := New(sluice.Policy{Algorithm: alg, Limit: limit, Period: u.Nominal(), Calendar: c})
		if err != nil {
			t.Fatal(err)
		}
		var s State
		var win time.Time
		var cur, prev int64
		now := time.Date(2026, 2, 20, 0, 0, 0, 0, time.UTC).UnixNano()
		step := int64(u.Nominal()) / 40
		for i := 0; i+1 < len(ops) && i < 128; i += 2 {
			now += int64(ops[i]) * step / 16
			cost := int64(ops[i+1]) % (limit + 2)
			start, end := c.Window(time.Unix(0, now))
			switch {
			case start.Equal(win):
			case win.Equal(func() time.Time { p, _ := c.Window(start.Add(-1)); return p }()):
				prev, cur = cur, 0
			default:
				prev, cur = 0, 0
			}
			win = start
			used := new(big.Rat).SetInt64(cur + max(cost, 1))
			if alg == sluice.SlidingWindow {
				p, e := end.Sub(start).Nanoseconds(), now-start.UnixNano()
				used.Add(used, big.NewRat(prev*(p-e), p))
			}
			want := cost <= limit && used.Cmp(big.NewRat(limit, 1)) <= 0
			next, d := m.Take(s, now, cost)
			if d.Allowed != want {
				t.Fatalf("%s %v at %v cost %d (cur %d prev %d): admitted %v, want %v", alg, c, time.Unix(0, now).In(c.Location), cost, cur, prev, d.Allowed, want)
			}
			if d.Allowed {
				cur += cost
				s = next
				continue
			}
			if d.Impossible {
				continue
			}
			r := int64(d.RetryAfter)
			if _, e := m.Take(s, now+r, cost); !e.Allowed {
				t.Fatalf("%s %v at %v cost %d: refused again after RetryAfter %v", alg, c, time.Unix(0, now).In(c.Location), cost, d.RetryAfter)
			}
			if _, e := m.Take(s, now+r-1, cost); r > 0 && e.Allowed {
				t.Fatalf("%s %v at %v cost %d: RetryAfter %v is not tight", alg, c, time.Unix(0, now).In(c.Location), cost, d.RetryAfter)
			}
		}
	})
}

// TestCalendarCharge: a charge on a calendar policy counts in the calendar
// window that holds now, as an admission does: a monthly budget of 10 in
// Berlin charged 8 on March 20 has 2 left that day and refuses a cost of 3,
// until April 1 (local midnight); a sliding window carries the charge into
// April weighted by its overlap.
func TestCalendarCharge(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	now := time.Date(2026, 3, 20, 12, 0, 0, 0, berlin).UnixNano()
	april := time.Date(2026, 4, 1, 0, 0, 0, 0, berlin).UnixNano()
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow} {
		m, err := New(monthly(berlin, alg, 10, 0))
		if err != nil {
			t.Fatal(err)
		}
		s, d := m.Charge(State{}, now, 8)
		if !d.Allowed || d.Remaining != 2 {
			t.Errorf("%s: the charge's decision %+v, want Allowed with Remaining 2", alg, d)
		}
		if _, d = m.Take(s, now+int64(time.Hour), 3); d.Allowed || d.Remaining != 2 {
			t.Errorf("%s: cost 3 an hour after charging 8 of 10: %+v, want refused with Remaining 2", alg, d)
		}
		if alg == sluice.FixedWindow {
			if d.RetryAfter != time.Duration(april-now-int64(time.Hour)) {
				t.Errorf("%s: RetryAfter %v, want %v (April 1, local midnight)", alg, d.RetryAfter, time.Duration(april-now-int64(time.Hour)))
			}
			if _, d = m.Take(s, april, 10); !d.Allowed {
				t.Errorf("%s: a whole month's quota on April 1 after March's charge: %+v, want admitted", alg, d)
			}
		}
		s, _ = m.Charge(s, now+int64(time.Hour), 5)
		if _, d = m.Take(s, now+2*int64(time.Hour), 0); d.Allowed || d.Remaining != 0 {
			t.Errorf("%s: a peek after charging 13 of 10: %+v, want refused (in debt)", alg, d)
		}
	}
}
