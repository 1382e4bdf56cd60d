// SPDX-License-Identifier: Apache-2.0

package model

import (
	"github.com/sluicehq/sluice"

	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestInPlace: each in-place entry point gives Take's decisions and leaves
// the fields Take's new state has, over random requests (cost 0 peeks,
// impossible and negative costs, a clock that sometimes steps back) and
// policies whose emission interval is and is not a whole nanosecond.
func TestInPlace(t *testing.T) {
	policies := []sluice.Policy{
		{Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Second},
		{Algorithm: sluice.GCRA, Limit: 7, Period: time.Second, Burst: 4},
		{Algorithm: sluice.LeakyBucket, Limit: 1000, Period: time.Second},
		{Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Second},
		{Algorithm: sluice.SlidingWindow, Limit: 5, Period: time.Second},
		{Algorithm: sluice.SlidingLog, Limit: 6, Period: time.Second},
		{Algorithm: sluice.SlidingLog, Limit: 9, Period: time.Minute},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range policies {
		// The first sliding-log policy keeps entries that have left the
		// window in its in-place log, on a clock that never steps back
		// (where keeping them cannot change a decision); the second prunes
		// them at each admission, as Take does.
		lazy := p.Algorithm == sluice.SlidingLog && p.Period == time.Second
		m, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		var s State
		var a, b, c int64  // the in-place copy
		var log []LogEntry // sliding-log's in-place log, never pruned
		now := int64(time.Hour)
		admitted := 0
		for i := range 20000 {
			now += rng.Int64N(int64(p.Period) / 4)
			if rng.IntN(20) == 0 && !lazy {
				now -= rng.Int64N(int64(p.Period))
			}
			cost := rng.Int64N(p.Capacity()+2) - 1
			next, want := m.Take(s, now, cost)
			var got sluice.Decision
			var exp int64
			switch p.Algorithm {
			case sluice.FixedWindow:
				exp = m.TakeFixedWindow(&a, &b, now, cost, &got)
				if a != next.Time || b != next.Count {
					t.Fatalf("%v step %d: state (%d, %d), want (%d, %d)", p, i, a, b, next.Time, next.Count)
				}
			case sluice.SlidingWindow:
				exp = m.TakeSlidingWindow(&a, &b, &c, now, cost, &got)
				if a != next.Time || b != next.Count || c != next.Prev {
					t.Fatalf("%v step %d: state (%d, %d, %d), want %+v", p, i, a, b, c, next)
				}
			case sluice.SlidingLog:
				// JudgeSlidingLog decides as TakeSlidingLog does, and
				// leaves the log (and its spare capacity) alone.
				before := slices.Clone(log[:cap(log)])
				var judged sluice.Decision
				jexp := m.JudgeSlidingLog(a, log, now, cost, &judged)
				if !slices.Equal(before, log[:cap(log)]) {
					t.Fatalf("%v step %d: JudgeSlidingLog wrote to the log", p, i)
				}
				log, exp = m.TakeSlidingLog(a, log, now, cost, &got)
				if judged != got || jexp != exp {
					t.Fatalf("%v step %d: JudgeSlidingLog %+v (expires %d), TakeSlidingLog %+v (expires %d)", p, i, judged, jexp, got, exp)
				}
				if got.Allowed && cost > 0 {
					if log[len(log)-1] != next.Log[len(next.Log)-1] {
						t.Fatalf("%v step %d: appended %+v, want %+v", p, i, log[len(log)-1], next.Log[len(next.Log)-1])
					}
					if !lazy {
						k := len(log) - len(next.Log)
						if k > 0 {
							a = int64(log[k-1].Total)
						}
						log = log[k:]
					}
				}
				if !lazy && (a != next.Count || len(log) != len(next.Log)) {
					t.Fatalf("%v step %d: state (%d, %v), want %+v", p, i, a, log, next)
				}
			default:
				exp = m.TakeBucket(&a, &b, now, cost, &got)
				if a != next.Time || b != next.Frac {
					t.Fatalf("%v step %d: state (%d, %d), want (%d, %d)", p, i, a, b, next.Time, next.Frac)
				}
			}
			if got != want {
				t.Fatalf("%v step %d (now %d, cost %d): %+v, want %+v", p, i, now, cost, got, want)
			}
			if e := m.ExpiresAt(next); exp != e {
				t.Fatalf("%v step %d: expires %d, want %d", p, i, exp, e)
			}
			if got.Allowed && cost > 0 {
				admitted++
			}
			s = next
		}
		if admitted == 0 {
			t.Fatalf("%v: nothing admitted: the test exercised only rejections", p)
		}
	}
}

// TestDivisor: divisor.div is exact for every divisor shape (1, powers of
// two and their neighbours, the largest period and limit) and dividends up
// to 2^63−1.
func TestDivisor(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ds := []int64{1, 2, 3, 5, 7, 10, 600_000_000, int64(time.Minute), int64(sluice.MaxPeriod), sluice.MaxLimit, 1<<63 - 1}
	for k := 1; k < 63; k++ {
		ds = append(ds, 1<<k-1, 1<<k, 1<<k+1)
	}
	for range 200 {
		ds = append(ds, rng.Int64N(1<<62)+1, rng.Int64N(1<<20)+1)
	}
	for _, d := range ds {
		v := newDivisor(d)
		ns := []int64{0, 1, d - 1, d, d + 1, 1<<62 - 1, 1 << 62, 1<<63 - 1, 1<<63 - 1 - (1<<63-1)%d, 1<<63 - 2 - (1<<63-1)%d}
		for range 2000 {
			ns = append(ns, rng.Int64N(1<<63-1), rng.Int64N(4*min(d, 1<<60)+1), d*rng.Int64N((1<<63-1)/d))
		}
		for _, n := range ns {
			if n < 0 {
				continue
			}
			if got, want := v.div(n), n/d; got != want {
				t.Fatalf("%d / %d = %d, want %d", n, d, got, want)
			}
		}
	}
}
