// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestFastRange: a policy outside the one-request scripts' exact range is
// decided by take.lua, and a state the scripts cannot read (written under
// another period or denominator, or a TAT over 2⁵² ns ahead) is handed to
// take.lua by the script, which writes nothing first: every decision is
// memstore's (the model's), step by step.
func TestFastRange(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	day := 24 * time.Hour
	steps := []struct {
		p    sluice.Policy
		fast string // c.fast for p: the path the test means to take
		at   time.Duration
	}{
		// A period of 1.5 µs: take.lua; then whole seconds reads a window
		// start that is no whole microsecond.
		{sluice.Policy{Name: "w", Algorithm: sluice.FixedWindow, Limit: 3, Period: 1500}, "", 700},
		{sluice.Policy{Name: "w", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Second}, "f", 800},
		{sluice.Policy{Name: "w", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Second}, "f", 900},
		// A fraction in sevenths, then read by a policy in thirds.
		{sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 7, Period: time.Second}, "b", 0},
		{sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Second}, "b", 1},
		{sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Second}, "b", 2},
		// A TAT 50 days ahead (over 2⁵² ns).
		{sluice.Policy{Name: "l", Algorithm: sluice.GCRA, Limit: 1, Period: 50 * day}, "b", 0},
		{sluice.Policy{Name: "l", Algorithm: sluice.GCRA, Limit: 1, Period: 50 * day}, "b", time.Hour},
		{sluice.Policy{Name: "l", Algorithm: sluice.GCRA, Limit: 2, Period: 100 * day, Burst: 1}, "b", 2 * time.Hour},
		// A limit of 2⁵³ and a burst lasting 2⁵² ns or more: take.lua.
		{sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1 << 53, Period: time.Second}, "", 0},
		{sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1, Period: 1 << 52}, "", 0},
	}
	t0 := time.Unix(1_700_000_000, 0)
	clock := sluicetest.NewClock(t0)
	s := newStore(t, c, WithClock(clock))
	ms := memstore.New(memstore.WithClock(clock))
	defer ms.Close()
	for i, st := range steps {
		cp, err := s.compile(st.p)
		if err != nil {
			t.Fatal(err)
		}
		if cp.fast != st.fast {
			t.Fatalf("step %d: %v takes script %q, want %q", i, st.p, cp.fast, st.fast)
		}
		clock.Set(t0.Add(st.at))
		for _, cost := range []int64{1, 0, 2} {
			got := take(t, s, st.p, "k", cost)
			want, err := ms.Take(t.Context(), st.p, "k", cost)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("step %d (%v at %v) cost %d:\n got  %+v\n want %+v", i, st.p, st.at, cost, got, want)
			}
		}
	}
}
