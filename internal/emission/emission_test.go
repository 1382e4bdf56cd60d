// SPDX-License-Identifier: Apache-2.0

package emission

import (
	"math"
	"testing"
	"time"
)

// Burst at its edges: min(b, ⌊d/T⌋ + c), b for a cost only an empty queue
// admits, for a bound past 2⁶⁴ intervals, and for products past 64 bits.
func TestBurst(t *testing.T) {
	const maxLimit, maxPeriod = 1 << 62, time.Duration(1 << 60) // sluice.MaxLimit, MaxPeriod
	for _, c := range []struct {
		b, limit int64
		period   time.Duration
		d        time.Duration
		cost     int64
		want     int64
	}{
		{30, 1, time.Second, 10 * time.Second, 1, 11},
		{30, 1, time.Second, 10*time.Second - 1, 1, 10},
		{30, 1, time.Second, 10 * time.Second, 5, 15},
		{30, 1, time.Second, 0, 1, 1},
		{30, 1, time.Second, -time.Second, 1, 1},
		{30, 1, time.Second, 29 * time.Second, 1, 30},
		{30, 1, time.Second, time.Hour, 1, 30},
		{30, 1, time.Second, 0, 30, 30},
		{30, 1, time.Second, 0, 31, 30},
		{10, 3, time.Second, time.Second, 1, 4},     // T = 1/3 s
		{10, 3, time.Second, time.Second - 1, 1, 3}, // 1 s − 1 ns: under 3 intervals
		{maxLimit, maxLimit, time.Nanosecond, 1 << 62, 1, maxLimit},
		{maxLimit, maxLimit, time.Nanosecond, 1, 1, maxLimit},
		{maxLimit, maxLimit, time.Nanosecond, 0, 1, 1},
		{maxLimit, maxLimit, maxPeriod, time.Second, 1, 4_000_000_001}, // T = 1/4 ns: 10⁹·2⁶² passes 64 bits
		{maxLimit, maxLimit, maxPeriod, math.MaxInt64, maxLimit - 1, maxLimit},
	} {
		if got := Burst(c.b, c.limit, c.period, c.d, c.cost); got != c.want {
			t.Errorf("Burst(%d, %d, %v, %v, %d) = %d; want %d", c.b, c.limit, c.period, c.d, c.cost, got, c.want)
		}
	}
}

// Count and Span are exact in 128 bits and saturate.
func TestCountSpan(t *testing.T) {
	if got := Count(math.MaxInt64, 1<<62, time.Nanosecond); got != math.MaxInt64 {
		t.Errorf("Count saturated = %d", got)
	}
	if got := Count(time.Second, 1<<62, 1<<60); got != 4_000_000_000 {
		t.Errorf("Count(1s, 2^62, 2^60) = %d; want 4e9", got)
	}
	if got := Span(4_000_000_000, 1<<62, 1<<60); got != time.Second {
		t.Errorf("Span(4e9, 2^62, 2^60) = %v; want 1s", got)
	}
	if got := Span(10, 3, time.Second); got != 3333333333 {
		t.Errorf("Span(10, 3/s) = %d; want ⌊10/3 s⌋", got)
	}
	if got := Span(math.MaxInt64, 1, math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("Span saturated = %v", got)
	}
}
