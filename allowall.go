// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/storeeq"
)

// Check is one (limiter, key, cost) of an AllowAll call. Its zero value is
// safe: no Cost asks for 1 unit, as Allow does; a peek is asked with Peek.
type Check struct {
	Limiter *Limiter
	Key     string
	// Cost is the units asked for; 0 means 1.
	Cost int64
	// Peek asks without taking, whatever Cost says: admitted iff a request
	// of cost 1 would be, changing nothing (a cost-0 store request).
	Peek bool
	// MaxDelay, when not 0, admits a leaky-bucket check only if its queue
	// delay would be at most MaxDelay (if negative: none), in the store call
	// that decides it: with T = Period/Limit, B the queue and c the cost (1
	// for a peek), the check is decided, exactly, as if the queue were
	// B_c = min(B, ⌊max(MaxDelay, 0)/T⌋ + c). Its Delay never passes
	// MaxDelay (a delay less than T short of it may be refused), and its
	// numbers are that queue's. Under FailLocal the local share is bounded
	// alike, with the share's B and T, so a refusal takes nothing there.
	// Other algorithms ignore it. It is an error on an unnamed leaky-bucket
	// policy (whose state only identical ones share) unless B ≤ c.
	MaxDelay time.Duration
}

// Result is the outcome of AllowAll. It is always consistent: Decisions
// has one entry per check, and Refused indexes one of them whenever
// Allowed is false.
type Result struct {
	// Allowed reports whether every check admitted its request; only then
	// was anything recorded.
	Allowed bool
	// Refused is the index of the first check that refused when Allowed
	// is false, and -1 when it is true.
	Refused int
	// Decisions holds each check's decision, in order. When the batch is
	// refused, the checks that would have admitted report their state
	// unconsumed, with Allowed true; when it could not be decided (the
	// caller's context ended, a bad check, a closed store), every decision
	// is a rejection.
	Decisions []Decision
}

// AllowAll checks several limits at once, all-or-nothing: the request is
// admitted only if every check admits it, and otherwise nothing is consumed
// anywhere. This is how per-IP, per-API-key and per-organisation limits
// compose. All limiters must share one Store, which applies the batch
// atomically (Store.TakeAll).
//
// On a store failure each check's failure mode decides its own decision
// (the FailLocal ones together, on their local store), and the batch is
// admitted only if all of them admit. When ctx ends, or the store is
// closed, or a check is invalid (a nil Limiter, a negative Cost, another
// store), the batch is refused, whatever the failure modes.
func AllowAll(ctx context.Context, checks ...Check) (Result, error) {
	if len(checks) == 0 {
		return Result{Allowed: true, Refused: -1}, nil
	}
	res := Result{Decisions: make([]Decision, len(checks))}
	reqs := make([]Request, len(checks))
	var store Store
	for i, c := range checks {
		if c.Limiter == nil || c.Limiter.bound == nil {
			return res.refuse(checks, i), fmt.Errorf("sluice: AllowAll: check %d: %w", i, errNoLimiter)
		}
		if i == 0 {
			store = c.Limiter.store
		} else if !storeeq.Same(c.Limiter.store, store) {
			return res.refuse(checks, i), fmt.Errorf("sluice: AllowAll: check %d: its limiter uses a different store than check 0", i)
		}
		if c.Cost < 0 {
			return res.refuse(checks, i), fmt.Errorf("sluice: AllowAll: check %d: policy %q: key %q: cost %d: must be >= 0", i, c.Limiter.policy.Name, c.Key, c.Cost)
		}
		reqs[i] = Request{Policy: c.Limiter.policy, Key: c.Key, Cost: max(c.Cost, 1)}
		if c.Peek {
			reqs[i].Cost = 0
		}
		p, err := c.Limiter.policy.within(c.MaxDelay, reqs[i].Cost)
		if err != nil {
			return res.refuse(checks, i), fmt.Errorf("sluice: AllowAll: check %d: %w", i, err)
		}
		reqs[i].Policy = p
	}
	err := store.TakeAll(ctx, reqs, res.Decisions)
	for i, c := range checks {
		if c.Limiter.observe != nil {
			c.Limiter.observe(ctx, c.Limiter.policy, c.Key, reqs[i].Cost, res.Decisions[i], err)
		}
	}
	if err != nil {
		err = fmt.Errorf("sluice: AllowAll: %w", err)
		if refuses(ctx, err) {
			return res.refuse(checks, 0), err
		}
		failedAll(ctx, checks, reqs, res.Decisions)
	}
	res.settle()
	return res, err
}

// refuse makes r a refusal of every check, check i first to refuse.
func (r Result) refuse(checks []Check, i int) Result {
	for j, c := range checks {
		r.Decisions[j] = Decision{}
		if c.Limiter != nil {
			r.Decisions[j].Limit = c.Limiter.policy.Limit
		}
	}
	r.Allowed, r.Refused = false, i
	return r
}

// settle derives Allowed and Refused from the decisions.
func (r *Result) settle() {
	r.Allowed, r.Refused = true, -1
	for i, d := range r.Decisions {
		if !d.Allowed {
			r.Allowed, r.Refused = false, i
			return
		}
	}
}
