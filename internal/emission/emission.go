// SPDX-License-Identifier: Apache-2.0

// Package emission is the exact arithmetic of a bucket's emission interval
// T = Period/Limit, written once for package sluice and its front ends:
// the span of k intervals, the whole intervals in a span, and the queue
// that bounds a leaky-bucket request's delay. Every product is taken in 128
// bits, so nothing overflows.
package emission

import (
	"math"
	"math/bits"
	"time"
)

// Span returns ⌊k·T⌋ = ⌊k·period/limit⌋ for k ≥ 0, limit ≥ 1 and
// period > 0, saturated at the largest Duration.
func Span(k, limit int64, period time.Duration) time.Duration {
	hi, lo := bits.Mul64(uint64(k), uint64(period))
	if hi >= uint64(limit) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(limit))
	return time.Duration(min(q, math.MaxInt64))
}

// Count returns ⌊d/T⌋ = ⌊d·limit/period⌋, the whole intervals in d, for
// limit ≥ 1 and period > 0 (0 for d ≤ 0), saturated at the largest int64.
func Count(d time.Duration, limit int64, period time.Duration) int64 {
	hi, lo := bits.Mul64(uint64(max(d, 0)), uint64(limit))
	if hi >= uint64(period) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(period))
	return int64(min(q, math.MaxInt64))
}

// Burst returns the queue under which a leaky bucket of queue b (Limit
// limit per period) admits a request of cost c ≥ 1 only if it waits at
// most d (not at all for d ≤ 0):
//
//	B_c = min(b, ⌊d/T⌋ + c) = min(b, ⌊d·limit/period⌋ + c)
//
// Why, from package model's rule: a request of cost c arriving at t meets
// the queue delay δ = max(TAT, t) − t (exact, in fractions of a
// nanosecond); it is admitted iff δ + c·T ≤ b·T, and its Delay is ⌈δ⌉.
// Under the queue B_c it is admitted iff δ ≤ (B_c − c)·T, that is iff it
// fits b's queue (δ ≤ (b − c)·T) and δ ≤ ⌊d/T⌋·T. Since ⌊d/T⌋·T ≤ d and d
// is whole nanoseconds, its Delay ⌈δ⌉ is then at most d: the bound is d
// rounded down to whole intervals, exact when d is a multiple of T (a
// Delay of d is admitted, one a nanosecond longer refused) and otherwise
// conservative (a δ in (⌊d/T⌋·T, d] is refused too, less than one T below
// d). A queue of B_c shares the key's TAT and its grid with b's (the same
// limit and period), so the request is decided in the one store call that
// admits it, and a refusal takes no place. When c ≥ b only an empty queue
// admits it, with no delay: b itself.
func Burst(b, limit int64, period, d time.Duration, c int64) int64 {
	if c >= b {
		return b
	}
	if k := Count(d, limit, period); k < b-c {
		return k + c
	}
	return b
}
