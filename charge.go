// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Charge records n units for key that were already spent (the tokens of
// an LLM response, the bytes of a download), even past the limit: the key
// is then in debt and refuses until that is paid back (package model says
// how, per algorithm). Admission stays with AllowN; Charge is for costs
// known only afterwards. n = 0 charges nothing and is a peek.
//
// The Decision is a peek right after the charge: Allowed reports whether
// key still admits a request of cost 1, RetryAfter when it will again. A
// non-nil error means the charge may not have been recorded (n is
// negative, ctx ended, or the store failed); on a store failure the
// Decision is the failure mode's answer to a peek (a FailLocal limiter
// does not charge its local share).
func (l *Limiter) Charge(ctx context.Context, key string, n int64) (Decision, error) {
	if l == nil || l.bound == nil {
		return Decision{}, errNoLimiter
	}
	if n < 0 {
		return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: charge %d: must be >= 0", l.policy.Name, key, n)
	}
	reqs := [1]Request{{Policy: l.policy, Key: key, Cost: n, Force: true}}
	var out [1]Decision
	err := l.store.TakeAll(ctx, reqs[:], out[:])
	if l.observe != nil {
		l.observe(ctx, l.policy, key, n, out[0], err)
	}
	if err != nil {
		err = fmt.Errorf("sluice: policy %q: key %q: charge: %w", l.policy.Name, key, err)
		if refuses(ctx, err) {
			return Decision{Limit: l.policy.Limit}, err
		}
		return l.failed(ctx, 0, key, 0), err
	}
	return out[0], nil
}

// Refunder is a Store that can give back units of an earlier admitted take
// where that is safe (memstore and redisstore are Refunders): a
// Reservation over one gives back what its commit did not use. The stamp
// is the store's own record of the take; only the store that made it
// reads it.
type Refunder interface {
	// TakeRefundable is Store.Take that also returns a stamp for Refund.
	TakeRefundable(ctx context.Context, p Policy, key string, cost int64) (Decision, any, error)
	// Refund gives back units of the take that returned stamp, where the
	// algorithm allows (model.Model.Give: token-bucket and gcra while no
	// other request has changed the key since; fixed-window within the
	// same window), and reports whether it did.
	Refund(ctx context.Context, p Policy, key string, stamp any, units int64) (bool, error)
}

// Reservation is capacity taken for a request whose cost is known only
// afterwards: Reserve takes an estimate, and Commit settles it with the
// actual cost. It is safe for concurrent use; it settles once.
type Reservation struct {
	// Decision is the reservation's admission decision. A refused
	// reservation holds nothing; committing it charges the actual cost.
	Decision Decision

	lim      *Limiter
	key      string
	estimate int64
	stamp    any // the Refunder's stamp, or nil

	mu      sync.Mutex
	settled bool
}

// ErrSettled is returned by Reservation.Commit and Cancel on a reservation
// that was committed or cancelled already.
var ErrSettled = errors.New("sluice: reservation already settled")

// Reserve asks for estimate units for key now, as AllowN does, and returns
// a Reservation to settle with Commit (or Cancel) once the actual cost is
// known. Check r.Decision.Allowed before doing the work. The error is
// AllowN's; r is never nil.
func (l *Limiter) Reserve(ctx context.Context, key string, estimate int64) (*Reservation, error) {
	if l == nil || l.bound == nil {
		return &Reservation{lim: l, key: key, settled: true}, errNoLimiter
	}
	r := &Reservation{lim: l, key: key, estimate: estimate}
	var err error
	if rf, ok := l.store.(Refunder); ok && estimate > 0 {
		r.Decision, r.stamp, err = rf.TakeRefundable(ctx, l.policy, key, estimate)
		if err != nil {
			r.stamp = nil
		}
		r.Decision, err = l.finish(ctx, key, estimate, r.Decision, err) // observed, or failed
	} else {
		r.Decision, err = l.AllowN(ctx, key, estimate)
	}
	if !r.Decision.Allowed || estimate < 0 {
		r.estimate = 0 // nothing held
	}
	return r, err
}

// Commit settles r with the actual cost: more than the estimate charges
// the difference (as Charge, even past the limit); less gives the
// difference back where the store and algorithm allow (Refunder), else
// leaves it spent. The Decision is the key's state after, as Charge's.
//
// A Commit that fails (other than with ErrSettled or a negative cost)
// leaves r unsettled for a retry, which does not repeat a give-back that
// succeeded. (A charge that the store applied before its call failed, as
// a timeout can, is then counted twice: a quota errs on the side of
// counting.)
func (r *Reservation) Commit(ctx context.Context, actual int64) (Decision, error) {
	if r == nil || r.lim == nil || r.lim.bound == nil {
		return Decision{}, errNoLimiter
	}
	l := r.lim
	if actual < 0 {
		return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: commit %d: must be >= 0", l.policy.Name, r.key, actual)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: commit: %w", l.policy.Name, r.key, ErrSettled)
	}
	if actual < r.estimate && r.stamp != nil {
		if _, err := l.store.(Refunder).Refund(ctx, l.policy, r.key, r.stamp, r.estimate-actual); err != nil {
			return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: commit: %w", l.policy.Name, r.key, err)
		}
		// Given back (or not givable): what r holds is now actual, and
		// a retry gives nothing back again.
		r.estimate, r.stamp = actual, nil
	}
	d, err := l.Charge(ctx, r.key, max(0, actual-r.estimate))
	if err == nil {
		r.settled = true
	}
	return d, err
}

// Cancel settles r as unused: Commit(ctx, 0).
func (r *Reservation) Cancel(ctx context.Context) error {
	_, err := r.Commit(ctx, 0)
	return err
}
