// SPDX-License-Identifier: Apache-2.0

package sluice

import "time"

// Decision is the answer to one request: admitted or not, and the numbers a
// client needs to pace itself.
type Decision struct {
	// Allowed reports whether the request was admitted (and its cost
	// recorded). A rejected request consumes nothing.
	Allowed bool
	// Impossible reports a rejection that no amount of waiting turns into an
	// admission: the cost exceeds the burst (bucket kinds) or the limit
	// (window kinds). RetryAfter is zero then.
	Impossible bool
	// Limit is the policy's Limit: units per Period.
	Limit int64
	// Remaining is the number of whole units still admissible now, after this
	// decision.
	Remaining int64
	// RetryAfter, on a rejection that can succeed later, is the shortest wait
	// after which the same request is admitted if nothing else arrives. It is
	// never too early and never later than needed.
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its idle state: a full
	// bucket, an empty window.
	ResetAfter time.Duration
	// Delay, for an admitted leaky-bucket request, is how long the request
	// waits in the queue before it is released. Zero for other algorithms.
	Delay time.Duration
	// Debt, on a rejection, is the whole units the key holds beyond its
	// capacity: costs Limiter.Charge recorded past the limit that have not
	// yet drained (a bucket's TAT past now + Burst·T, rounded down to whole
	// units; a window's count past the limit; a sliding window's weighted
	// count, rounded down). Zero when the key is not in debt.
	Debt int64
}
