// SPDX-License-Identifier: Apache-2.0

// Package model holds the pure rate-limiting models, the oracle every
// sluice store is tested against.
//
// A Model is a validated sluice.Policy (New). Its Take maps (state, now,
// cost) to (state, decision): it never reads a clock and never does I/O,
// and the state is a small fixed-size value (sliding-log aside). Stores run
// it under their own atomicity and supply the time; the in-place variants
// (TakeBucket, TakeFixedWindow, ...) let a store keep the state in its own
// layout, and TakeBurst (with TakeBucketBurst, ChargeBurst and GiveBurst)
// decides a request under another burst than the policy's, on the same
// state, as the model of that burst would (sluice.Check.Burst); TakeLimit
// (with ChargeLimit and the in-place TakeFixedWindowLimit, ...) does the
// same for a window kind's Limit.
//
// # Semantics
//
// Every algorithm is exact, on every store, and follows the same rules:
// rejected requests consume nothing; a cost of 0 peeks without changing
// anything; a cost that can never be admitted (more than the burst, or the
// limit for the window kinds) is rejected with Decision.Impossible and no
// RetryAfter; RetryAfter is the shortest wait after which the same request
// is admitted if nothing else arrives (never too early); ResetAfter is the
// time until the key is idle again; a store forgets a key exactly when its
// state becomes equivalent to none.
//
// Time is integer nanoseconds. With the emission interval T = Period/Limit,
// token-bucket and gcra admit a request of cost c at t iff
// max(TAT, t) + c·T − t ≤ Burst·T and then set TAT = max(TAT, t) + c·T, where
// TAT (the theoretical arrival time) is the one timestamp stored per key. T
// is kept as an exact fraction (and the TAT with it, as whole nanoseconds and
// a fraction of one), so no drift accumulates and a request that arrives at
// the exact instant enough capacity exists is admitted.
//
// # Token bucket = GCRA = leaky bucket as a meter
//
// A token bucket holding Burst tokens that refills Limit per Period holds
// Burst − (TAT−t)/T tokens at t: the bucket's deficit, measured in time, is
// how far the theoretical arrival time runs ahead of now. Taking c tokens is
// pushing the TAT c·T further; the bucket overflows exactly when the TAT would
// run more than Burst·T ahead. That is the Generic Cell Rate Algorithm, and it
// is also the leaky bucket used as a meter (a bucket that drains at Limit per
// Period and may not overflow Burst). So token-bucket, gcra and leaky-bucket
// admit exactly the same requests. The leaky bucket as a queue adds only the
// Delay: an admitted request waits max(0, TAT−t), with the TAT before it, so
// that the downstream sees a constant rate.
//
// The windows count instead: fixed-window counts units per window aligned to
// multiples of Period since the Unix epoch; sliding-log keeps every admitted
// request of the last Period (an entry exactly Period old has left);
// sliding-window weighs the previous aligned window by how much of it the
// sliding window still overlaps: prev·(P−e)/P + cur + c ≤ Limit, compared
// exactly in integers. With a calendar.Calendar the two window kinds count
// calendar days, weeks, months or years of a time zone instead, each as
// long as the wall clock makes it (Model.Window; calendar.go).
//
// # Debt
//
// Charge records a cost that has already been spent (LLM tokens counted
// after the response) even past the limit. The key is then in debt and
// refuses until the debt is paid back; Model.Charge says what that is for
// each algorithm (a bucket's TAT runs past now + Burst·T, a window's count
// past the limit, a log's sum past it until its entries age out).
package model
