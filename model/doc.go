// SPDX-License-Identifier: Apache-2.0

// Package model holds the pure rate-limiting models, the oracle every
// sluice store is tested against.
//
// A Model is a validated sluice.Policy. Its Take maps (state, now, cost) to
// (state, decision): it never reads a clock and never does I/O, and the
// state is a small fixed-size value (sliding-log aside). Stores run it
// under their own atomicity and supply the time; the in-place variants
// (TakeBucket, TakeFixedWindow, ...) let a store keep the state in its own
// layout. Time is integer nanoseconds and every product of a count and a
// duration is formed in 128 bits, so nothing drifts or overflows within
// the limits sluice.Policy.Validate enforces (sluice.MaxLimit, MaxPeriod,
// MaxTime).
package model
