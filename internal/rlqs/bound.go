// SPDX-License-Identifier: Apache-2.0

package rlqs

import "time"

// Excess is the most a fleet can admit above a limit of rate requests per
// second over any window of length w (see the package documentation):
//
//	(J + 1 + k·(⌊w/C⌋ + 1)) · (rate·T + n)
//
// for n streams reporting the bucket through k replicas, J streams that
// join during the window, re-division every C (tick) and token buckets of
// T (burst) of their rate.
func Excess(rate float64, n, k, joins int, w, tick, burst time.Duration) float64 {
	batches := float64(joins+1) + float64(k)*float64(w/tick+1)
	return batches * (rate*burst.Seconds() + float64(n))
}
