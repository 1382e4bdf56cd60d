// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestCalendarRedisTime runs a calendar day on Redis TIME while this
// process's guess of it is a month wrong, as a host whose clock is off (or a
// call crossing midnight) would be: the script refuses the window it is
// given, the store sends the one that holds Redis TIME, and the key's
// window is that UTC day. Without the retry the batch fails (the script
// answers "2"); without the check in the script it counts in January.
func TestCalendarRedisTime(t *testing.T) {
	t.Parallel()
	c := newClient(t, sluicetest.StartRedis(t))
	s := newStore(t, c, WithPrefix("cal:"))
	guesses := 0
	s.guessClock = func() int64 {
		guesses++
		return time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC).UnixNano()
	}
	p := sluice.Policy{Name: "daily", Algorithm: sluice.FixedWindow, Limit: 3, Period: calendar.Day.Nominal(),
		Calendar: calendar.Calendar{Unit: calendar.Day}}
	m, err := model.New(p)
	if err != nil {
		t.Fatal(err)
	}
	redisTime := func() int64 {
		v, err := c.Do(context.Background(), c.B().Time().Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		sec, _ := strconv.ParseInt(v[0], 10, 64)
		us, _ := strconv.ParseInt(v[1], 10, 64)
		return sec*1e9 + us*1e3
	}
	before := redisTime()
	admits(t, s, p, "k", true, true, true, false)
	after := redisTime()
	if guesses != 4 {
		t.Fatalf("%d guesses of Redis TIME for 4 requests, want 4", guesses)
	}
	fields, err := c.Do(context.Background(), c.B().Hkeys().Key(stateKeyOf(s, p, "k")).Build()).AsStrSlice()
	if err != nil || len(fields) != 1 {
		t.Fatalf("the key's fields: %q, %v; want one, start:end", fields, err)
	}
	start, _, _ := strings.Cut(fields[0], ":")
	stored, err := strconv.ParseInt(start, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	w0, _ := m.Window(before)
	w1, _ := m.Window(after)
	if stored != w0.Start && stored != w1.Start {
		t.Fatalf("the key's window starts at %v, want the UTC day of Redis TIME, %v", time.Unix(0, stored).UTC(), time.Unix(0, w0.Start).UTC())
	}
}

// TestCalendarClockBack steps a store's clock back across a month boundary
// in Berlin: the stored window (March) is later than the clock (February),
// so the script decides in March, as the model does, after the store sends
// March's window in place of February's.
func TestCalendarClockBack(t *testing.T) {
	t.Parallel()
	c := newClient(t, sluicetest.StartRedis(t))
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	clock := sluicetest.NewClock(time.Date(2026, 3, 1, 0, 0, 0, 0, berlin))
	s := newStore(t, c, WithClock(clock), WithPrefix("back:"))
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow} {
		p := sluice.Policy{Name: "monthly", Algorithm: alg, Limit: 5, Period: calendar.Month.Nominal(),
			Calendar: calendar.Calendar{Unit: calendar.Month, Location: berlin}}
		m, err := model.New(p)
		if err != nil {
			t.Fatal(err)
		}
		var st model.State
		for i, at := range []time.Time{time.Date(2026, 3, 1, 0, 0, 0, 0, berlin), time.Date(2026, 2, 27, 0, 0, 0, 0, berlin), time.Date(2026, 2, 28, 23, 0, 0, 0, berlin)} {
			clock.Set(at)
			var want sluice.Decision
			st, want = m.Take(st, at.UnixNano(), 2)
			if got := take(t, s, p, "k", 2); got != want {
				t.Fatalf("%s step %d at %v: got %+v, want %+v", alg, i, at, got, want)
			}
		}
	}
}

// stateKeyOf returns the Redis key of (p, key)'s state hash in s.
func stateKeyOf(s *Store, p sluice.Policy, key string) string {
	k, _ := stateKey(s.prefix, s.slot, policyTag(p), key)
	return k
}
