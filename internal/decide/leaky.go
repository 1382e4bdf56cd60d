// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/emission"
)

// The longest delay of a leaky-bucket request, decided in the one store
// call that admits it.
//
// Decide asks each enforced check with MaxDelay D, the shorter of
// Request.MaxDelay and the time left before the deadline
// (sluice.Check.MaxDelay). The root package decides it with the queue
// B_c = min(B, ⌊D/T⌋ + c) of the policy that decides it (the limiter's,
// or its local share when the store fails: FailLocal), T = Period/Limit
// and c the cost: admitted iff its queue delay δ fits the queue and δ ≤
// ⌊D/T⌋·T, so its Delay ⌈δ⌉ is never past D (emission.Burst derives it
// from package model's rule). A refusal takes no place, and its RetryAfter
// is the store's, exact for that rule. Decide evaluates B_c only to report
// (Remaining, and whether the deadline or the maximum refused), with the
// policy that decided: Limiter.Policy, or Limiter.LocalShare when the
// store failed (so no admission is ever undone after the fact).
//
// After an admission, Remaining is what still fits within Request.MaxDelay
// for a request of cost 1: B_1 − ⌈δ'/T⌉ with δ' the queue delay after it,
// which is the decision's B_c − ⌈δ'/T⌉ less B_c − B_1. An idle key admits
// B_1 requests of cost 1 within the maximum: front ends advertise that as
// the queue's capacity (Capacity).

// burst returns B_c = min(B, ⌊d/T⌋ + c) for leaky-bucket policy p, d and
// c ≥ 1 (emission.Burst).
func burst(p sluice.Policy, d time.Duration, c int64) int64 {
	return emission.Burst(p.Capacity(), p.Limit, p.Period, d, c)
}

// Capacity returns the capacity a front end advertises for policy p when
// it holds leaky-bucket requests at most maxDelay: B_1 = min(B, ⌊D/T⌋ + 1),
// the requests of cost 1 an idle key admits within maxDelay (a queue
// place a request may not take is no capacity). It is p's capacity for
// the other algorithms.
func Capacity(p sluice.Policy, maxDelay time.Duration) int64 {
	if p.Algorithm != sluice.LeakyBucket {
		return p.Capacity()
	}
	return burst(p, maxDelay, 1)
}

// boundOf returns the longest delay q's leaky-bucket requests may be held
// for: q.MaxDelay, or less when ctx's deadline comes sooner (a request
// that would wait past its deadline takes no place in the queue: see
// Decide). deadline says the deadline is the bound.
func boundOf(ctx context.Context, maxDelay time.Duration) (bound time.Duration, deadline bool) {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < maxDelay {
			return max(left, 0), true
		}
	}
	return maxDelay, false
}

// bindLeaky sets the MaxDelay of each check to bound (a negative one for
// a bound of 0, which a Check reads as none). The other algorithms ignore
// it; Order has refused an unnamed leaky-bucket policy that would need it.
func bindLeaky(checks []sluice.Check, bound time.Duration) {
	if bound <= 0 {
		bound = -1
	}
	for k := range checks {
		checks[k].MaxDelay = bound
	}
}

// settleLeaky adjusts the decisions ds of the enforced checks, decided
// under bound (bindLeaky) by their limiters' policies, or when the store
// failed (failed) by the local shares of those that fail local: each
// leaky-bucket Remaining becomes what fits within maxDelay for a request
// of cost 1; and when the deadline is the bound (deadline), a refusal the
// maximum alone would have admitted makes the request Gone (err says why),
// and one it would have refused waits for the maximum, not the deadline.
func settleLeaky(checks []sluice.Check, ds []sluice.Decision, failed bool, bound, maxDelay time.Duration, deadline bool) (err error) {
	for k := range ds {
		c, d := &checks[k], &ds[k]
		p, ok := c.Limiter.Policy(), true
		if failed {
			p, ok = c.Limiter.LocalShare() // false unless FailLocal decided it
		}
		if !ok || p.Algorithm != sluice.LeakyBucket {
			continue
		}
		cost := max(c.Cost, 1)
		b := burst(p, bound, cost)
		d.Remaining = max(d.Remaining-(b-burst(p, maxDelay, 1)), 0)
		if !deadline || d.Allowed || d.Impossible || err != nil {
			continue
		}
		bmax := burst(p, maxDelay, cost)
		if bmax == b {
			continue // the deadline did not lower the burst: the maximum refused
		}
		// The queue delay it met is ⌈δ⌉ = ResetAfter; the maximum admits
		// δ ≤ (B_c − c)·T, whose floor in whole nanoseconds bounds ⌈δ⌉.
		within := emission.Span(bmax-cost, p.Limit, p.Period)
		if d.ResetAfter <= within {
			err = fmt.Errorf("decide: the queue delay %v of %q would pass the request's deadline: %w", d.ResetAfter, p.Name, context.DeadlineExceeded)
			continue
		}
		d.RetryAfter = d.ResetAfter - within
	}
	return err
}
