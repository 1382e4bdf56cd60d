// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/line"
	"github.com/sluicehq/sluice/internal/storeeq"
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
	// policy (Policy.Share, for the replica count WithLocalStore is given): the fleet
	// stays available and within a stated bound (docs/design.md, "When the
	// store fails").
	FailLocal
)

// String returns "open", "closed" or "local", and "FailureMode(n)" for a
// value that is none of them (NewLimiter refuses it).
func (m FailureMode) String() string {
	if int(m) < len(failureModes) {
		return failureModes[m]
	}
	return "FailureMode(" + strconv.Itoa(int(m)) + ")"
}

// failureModes are the modes' names, by value.
var failureModes = [...]string{FailOpen: "open", FailClosed: "closed", FailLocal: "local"}

// Option configures a Limiter.
type Option func(*Limiter)

// WithFailureMode sets what the Limiter answers when its store fails.
func WithFailureMode(m FailureMode) Option { return func(l *Limiter) { l.failure = m } }

// Limiter applies one Policy to any number of keys, over a Store. It is safe
// for concurrent use; all its state lives in the store, so many Limiters (in
// many processes, over a shared store) enforce one limit together. Leases
// and shards are chosen with the store: lease.New, shard.New.
//
// Make one with NewLimiter. The zero Limiter (and a nil *Limiter) has no
// store and refuses every request with an error wrapping ErrStoreClosed,
// as golang.org/x/time/rate's zero Limiter refuses every event.
type Limiter struct {
	store   Store
	policy  Policy
	bound   BoundPolicy // the store's binding of policy
	failure FailureMode
	observe observer // WithObserver; nil: none
	// FailLocal (failover.go): the local store, the replica count and the
	// cached share.
	local    Store
	replicas ReplicaCounter
	shares   atomic.Pointer[localShare]
	// Wait's queues, per key (wait.go).
	lines line.Lines
}

// NewLimiter returns a Limiter that applies p over store. It fails if p is
// invalid.
func NewLimiter(store Store, p Policy, opts ...Option) (*Limiter, error) {
	if storeeq.Nil(store) {
		return nil, errors.New("sluice: NewLimiter: store is nil")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{store: store, policy: p, bound: Bound(store, p)}
	for _, o := range opts {
		if o != nil {
			o(l)
		}
	}
	if l.failure > FailLocal {
		return nil, fmt.Errorf("sluice: NewLimiter: failure mode %d: must be FailOpen, FailClosed or FailLocal", l.failure)
	}
	if l.failure == FailLocal && l.local == nil {
		return nil, errNoLocalStore
	}
	return l, nil
}

// Policy returns the limiter's policy (the zero Policy for a nil
// *Limiter).
func (l *Limiter) Policy() Policy {
	if l == nil {
		return Policy{}
	}
	return l.policy
}

// FailureMode returns what the limiter answers when its store fails.
func (l *Limiter) FailureMode() FailureMode {
	if l == nil {
		return FailOpen
	}
	return l.failure
}

// Store returns the store the limiter asks (nil for a Limiter without
// one).
func (l *Limiter) Store() Store {
	if l == nil {
		return nil
	}
	return l.store
}

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN asks whether n units for key are admitted now, and records them if
// so. n = 0 is a peek: it changes nothing, and is admitted iff a request of
// cost 1 would be admitted now.
//
// A non-nil error means the request could not be decided (n is negative,
// ctx ended, or the store failed), and the Decision is the failure mode's
// (see FailureMode), so a caller can log the error and still act on
// Decision.Allowed. Whatever the mode, it is a rejection when ctx ended
// (the caller has gone) or the store is closed (ErrStoreClosed).
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	if l == nil || l.bound == nil {
		return Decision{}, errNoLimiter
	}
	if n < 0 {
		return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: cost %d: must be >= 0", l.policy.Name, key, n)
	}
	d, err := l.bound.Take(ctx, key, n)
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
		err = fmt.Errorf("sluice: policy %q: key %q: %w", l.policy.Name, key, err)
		if refuses(ctx, err) {
			return Decision{Limit: l.policy.Limit}, err
		}
		return l.failed(ctx, 0, key, n), err
	}
	return d, nil
}

// refuses reports whether err is one that no failure mode turns into an
// admission: the caller's context ended, or the store is closed.
func refuses(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, ErrStoreClosed)
}
