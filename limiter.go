// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// FailureMode says what a Limiter answers when its store fails.
type FailureMode uint8

const (
	// FailOpen admits requests while the store is failing: the limit is
	// briefly not enforced, but the service stays up. The default of a
	// Limiter (sluice serve's default is FailLocal).
	FailOpen FailureMode = iota
	// FailClosed rejects requests while the store is failing.
	FailClosed
	// FailLocal decides requests while the store is failing with an
	// in-process store (WithLocalStore) holding this replica's share of the
	// policy (Policy.Share, for the count WithReplicas reports): the fleet
	// stays available and within a stated bound (see the package
	// documentation, "When the store fails").
	FailLocal
)

// String returns "open", "closed" or "local".
func (m FailureMode) String() string {
	switch m {
	case FailClosed:
		return "closed"
	case FailLocal:
		return "local"
	}
	return "open"
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithFailureMode sets what the Limiter answers when its store fails.
func WithFailureMode(m FailureMode) Option { return func(l *Limiter) { l.failure = m } }

// Limiter applies one Policy to any number of keys, over a Store. It is safe
// for concurrent use; all its state lives in the store, so many Limiters (in
// many processes, over a shared store) enforce one limit together. With
// WithLease it also holds local budgets taken from the store, and with
// WithShards it spreads each key over sub-keys: see the package
// documentation, "Leases" and "Sharding".
type Limiter struct {
	store   Store
	policy  Policy
	failure FailureMode
	observe Observer // WithObserver; nil: none
	// FailLocal (failover.go): the local store, the replica count and the
	// cached share.
	local    Store
	replicas ReplicaCounter
	shares   shareCache
	bound    BoundPolicy // the store's binding of policy (bind.go)
	taker    BoundPolicy // what take asks: bound, or spread (bind.go)
	// Leases (lease.go) and hot-key shards (shard.go).
	leaseTarget time.Duration
	clock       Clock
	leases      *leaseTable
	shards      int
	shardSet    *shardSet
}

// NewLimiter returns a Limiter that applies p over store. It fails if p is
// invalid.
func NewLimiter(store Store, p Policy, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("sluice: NewLimiter: store is nil")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{store: store, policy: p, bound: bind(store, p)}
	for _, o := range opts {
		o(l)
	}
	if l.failure == FailLocal && l.local == nil {
		return nil, errNoLocalStore
	}
	if err := l.checkLease(); err != nil {
		return nil, err
	}
	if err := l.checkShards(); err != nil {
		return nil, err
	}
	l.setTaker()
	return l, nil
}

// Policy returns the limiter's policy.
func (l *Limiter) Policy() Policy { return l.policy }

// FailureMode returns what the limiter answers when its store fails.
func (l *Limiter) FailureMode() FailureMode { return l.failure }

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN asks whether n units for key are admitted now, and records them if
// so. n = 0 peeks at the key's state without changing it.
//
// A non-nil error means the request could not be decided: n is negative,
// ctx ended, or the store failed. On a store failure the Decision is the one
// the failure mode dictates (Allowed under FailOpen, rejected under
// FailClosed, the local share's decision under FailLocal), so a caller can
// log the error and still act on Decision.Allowed. When ctx ended, the Decision is a rejection whatever the
// failure mode: the caller has gone.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	if n < 0 {
		return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: cost %d: must be >= 0", l.policy.Name, key, n)
	}
	d, err := l.take(ctx, key, n)
	if err == nil && l.observe == nil {
		return d, nil // kept apart so that d stays in registers
	}
	return l.finish(ctx, key, n, d, err)
}

// finish is the rest of AllowN for a decision that is observed or failed.
func (l *Limiter) finish(ctx context.Context, key string, n int64, d Decision, err error) (Decision, error) {
	if l.observe != nil {
		l.observe(ctx, l.policy, key, n, d, err)
	}
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up: that is no store failure, and no
			// failure mode applies.
			return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: %w", l.policy.Name, key, err)
		}
		return l.failed(ctx, key, n), fmt.Errorf("sluice: policy %q: key %q: %w", l.policy.Name, key, err)
	}
	return d, nil
}

// Wait blocks until n units for key are admitted, or ctx ends. It returns
// ErrImpossible at once if n exceeds the policy's capacity, and an error
// without waiting if ctx's deadline comes before the request could be
// admitted.
//
// For the window kinds and token-bucket/gcra, Wait sleeps for the decision's
// RetryAfter and tries again, so a cancelled Wait consumes nothing. For
// leaky-bucket, an admitted request has a place in the queue and Wait sleeps
// for its Delay; cancelling it during that delay does not give the place
// back (the queue has no refunds). Wait first checks that the current
// queue delay fits before ctx's deadline, so that it does not take a place
// it cannot use; a request that others enqueue between that check and Wait's
// own can still push its delay past the deadline, and then Wait returns
// ctx's error when the deadline comes, having used its place.
//
// On a store failure Wait returns at once with the error and the decision of
// the failure mode, as AllowN does.
func (l *Limiter) Wait(ctx context.Context, key string, n int64) (Decision, error) {
	if n > l.policy.Capacity() {
		return Decision{Limit: l.policy.Limit, Impossible: true}, fmt.Errorf("sluice: policy %q: key %q: cost %d: %w", l.policy.Name, key, n, ErrImpossible)
	}
	for {
		if err := ctx.Err(); err != nil {
			return Decision{Limit: l.policy.Limit}, err
		}
		if l.policy.Algorithm == LeakyBucket {
			// Peek at the queue: don't take a place that can't be
			// released before the deadline.
			p, err := l.AllowN(ctx, key, 0)
			if err != nil {
				return p, err
			}
			if !fits(ctx, p.Delay) {
				return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: the queue delay %v would exceed the context deadline", l.policy.Name, key, p.Delay)
			}
		}
		d, err := l.AllowN(ctx, key, n)
		switch {
		case err != nil:
			return d, err
		case d.Impossible:
			return d, fmt.Errorf("sluice: policy %q: key %q: cost %d: %w", l.policy.Name, key, n, ErrImpossible)
		case d.Allowed:
			if d.Delay > 0 {
				if err := sleep(ctx, d.Delay); err != nil {
					return d, err
				}
			}
			return d, nil
		}
		if !fits(ctx, d.RetryAfter) {
			return d, fmt.Errorf("sluice: policy %q: key %q: waiting %v would exceed the context deadline", l.policy.Name, key, d.RetryAfter)
		}
		if err := sleep(ctx, d.RetryAfter); err != nil {
			return d, err
		}
	}
}

// fits reports whether waiting d ends before ctx's deadline.
func fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || !time.Now().Add(d).After(deadline)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Check is one (limiter, key, cost) of an AllowAll call.
type Check struct {
	Limiter *Limiter
	Key     string
	Cost    int64
}

// Result is the outcome of AllowAll.
type Result struct {
	// Allowed reports whether every check admitted its request; only then
	// was anything recorded.
	Allowed bool
	// Refused is the index of the first check that refused, or -1.
	Refused int
	// Decisions holds each check's decision, in order. When the batch is
	// refused, the checks that would have admitted report their state
	// unconsumed, with Allowed true.
	Decisions []Decision
}

// AllowAll checks several limits at once, all-or-nothing: the request is
// admitted only if every check admits it, and otherwise nothing is consumed
// anywhere. This is how per-IP, per-API-key and per-organisation limits
// compose. All limiters must share one Store, which applies the batch
// atomically.
//
// On a store failure each check's failure mode decides its own decision
// (the FailLocal ones together, on their local store), and the batch is
// admitted only if all of them admit.
//
// A batch of one check is decided by its limiter's AllowN, through its
// leases and, for a sharded limit, every shard in turn; in a larger batch a
// leasing limit takes from the store directly and a sharded one offers one
// of its shards.
func AllowAll(ctx context.Context, checks ...Check) (Result, error) {
	res := Result{Refused: -1}
	if len(checks) == 0 {
		res.Allowed = true
		return res, nil
	}
	if checks[0].Limiter == nil {
		return res, errors.New("sluice: AllowAll: check 0: Limiter is nil")
	}
	store := checks[0].Limiter.store
	reqs := make([]Request, len(checks))
	for i, c := range checks {
		if c.Limiter == nil {
			return res, fmt.Errorf("sluice: AllowAll: check %d: Limiter is nil", i)
		}
		if !sameStore(c.Limiter.store, store) {
			return res, fmt.Errorf("sluice: AllowAll: check %d: its limiter uses a different store than check 0", i)
		}
		if c.Cost < 0 {
			return res, fmt.Errorf("sluice: AllowAll: check %d: policy %q: key %q: cost %d: must be >= 0", i, c.Limiter.policy.Name, c.Key, c.Cost)
		}
		reqs[i] = c.Limiter.request(c.Key, c.Cost)
	}
	if len(checks) == 1 {
		return allowOne(ctx, checks[0])
	}
	res.Decisions = make([]Decision, len(checks))
	err := store.TakeAll(ctx, reqs, res.Decisions)
	observeAll(ctx, checks, res.Decisions, err)
	if err != nil {
		if ctx.Err() != nil { // the caller gave up: no failure mode applies
			clear(res.Decisions)
			res.Allowed = false
			return res, fmt.Errorf("sluice: AllowAll: %w", err)
		}
		failedAll(ctx, checks, res.Decisions)
		res.settle()
		return res, fmt.Errorf("sluice: AllowAll: %w", err)
	}
	for i, c := range checks {
		res.Decisions[i].Limit = c.Limiter.policy.Limit // a shard's is its part
	}
	res.settle()
	return res, nil
}

// allowOne is AllowAll of one check: its limiter's AllowN, so that its
// leases and shards decide as they do there.
func allowOne(ctx context.Context, c Check) (Result, error) {
	d, err := c.Limiter.AllowN(ctx, c.Key, c.Cost)
	if err != nil && ctx.Err() != nil {
		d = Decision{}
	}
	res := Result{Decisions: []Decision{d}}
	res.settle()
	if err != nil {
		return res, fmt.Errorf("sluice: AllowAll: %w", err)
	}
	return res, nil
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

func sameStore(a, b Store) bool {
	return reflect.TypeOf(a).Comparable() && a == b
}
