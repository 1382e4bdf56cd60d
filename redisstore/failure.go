// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// ErrUnavailable is returned (wrapped) while the circuit breaker is open:
// Redis failed repeatedly just now, and the store answers at once instead of
// waiting for another timeout. The Limiter's failure mode decides what the
// caller sees.
var ErrUnavailable = errors.New("redisstore: Redis is unavailable (circuit breaker open)")

// Defaults of the failure handling.
const (
	// DefaultTimeout bounds each call to Redis, well under the 20 ms an
	// Envoy rate-limit call allows.
	DefaultTimeout = 10 * time.Millisecond
	// DefaultBreakerFailures is the number of consecutive failed calls that
	// open the circuit breaker.
	DefaultBreakerFailures = 5
	// DefaultBreakerCooldown is how long the breaker stays open before it
	// lets one probe call through.
	DefaultBreakerCooldown = 200 * time.Millisecond
)

// WithTimeout bounds each call to Redis to d, or to the caller's deadline
// when that is sooner. The bound is d plus at most a millisecond, since calls
// that begin within the same millisecond share one deadline; a caller's
// cancellation is seen before the call and not during it. d ≤ 0 means no
// bound beyond the caller's context, which is then used as it is. The
// default is DefaultTimeout.
//
// A call that times out after Redis ran the script may have consumed
// capacity without reporting an admission: failures err on the side of
// limiting.
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithBreaker configures the circuit breaker: after failures consecutive
// failed calls it opens, and calls fail at once with ErrUnavailable; after
// cooldown one probe call goes through, and its success closes the breaker
// (its failure keeps it open for another cooldown). failures ≤ 0 disables
// the breaker. The defaults are DefaultBreakerFailures and
// DefaultBreakerCooldown, so a Redis that answers again is used within
// about 200 ms.
func WithBreaker(failures int, cooldown time.Duration) Option {
	return func(s *Store) { s.brk.threshold, s.brk.cooldown = int32(failures), cooldown }
}

// Stats counts what a store has done since it was created.
type Stats struct {
	// Calls is the number of calls to Redis (one per Take or TakeAll that
	// got past validation and the breaker).
	Calls uint64
	// Errors is the number of those calls that failed (including timeouts).
	Errors uint64
	// Timeouts is the number of calls that ran out of the store's timeout.
	Timeouts uint64
	// ShortCircuited is the number of Take and TakeAll calls refused at
	// once with ErrUnavailable because the breaker was open.
	ShortCircuited uint64
	// BreakerOpens is the number of times the breaker opened.
	BreakerOpens uint64
	// DialErrors counts failed attempts to connect (Open connects on demand
	// when Redis was down at the start).
	DialErrors uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		Calls:          s.stats.calls.Load(),
		Errors:         s.stats.errors.Load(),
		Timeouts:       s.stats.timeouts.Load(),
		ShortCircuited: s.stats.short.Load(),
		BreakerOpens:   s.stats.opens.Load(),
		DialErrors:     s.stats.dialErrors.Load(),
	}
}

type counters struct {
	calls, errors, timeouts, short, opens, dialErrors atomic.Uint64
}

// breaker is a lock-free circuit breaker.
type breaker struct {
	threshold int32
	cooldown  time.Duration
	failures  atomic.Int32
	openUntil atomic.Int64 // unix ns; 0: closed
	probing   atomic.Bool
}

// allow reports whether a call may go to Redis now.
func (b *breaker) allow() bool {
	u := b.openUntil.Load()
	if u == 0 || b.threshold <= 0 {
		return true
	}
	if time.Now().UnixNano() < u {
		return false
	}
	return b.probing.CompareAndSwap(false, true) // one probe at a time
}

func (b *breaker) success() {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if b.openUntil.Load() != 0 {
		b.openUntil.Store(0)
		b.probing.Store(false)
	}
}

// failure records a failed call and reports whether it opened the breaker.
func (b *breaker) failure() bool {
	if b.threshold <= 0 {
		return false
	}
	n := b.failures.Add(1)
	if n >= b.threshold || b.probing.Load() {
		b.openUntil.Store(time.Now().Add(b.cooldown).UnixNano())
		b.probing.Store(false)
		return true
	}
	return false
}

// call runs f against Redis under the timeout, the breaker and the counters.
// parent is the caller's context: its own cancellation is not a Redis
// failure.
func (s *Store) call(parent context.Context, f func(ctx context.Context) error) error {
	ctx, err := s.begin(parent)
	if err != nil {
		return err
	}
	return s.end(parent, f(ctx))
}

// begin starts a call to Redis: it returns parent's error if parent is
// already done, ErrUnavailable if the breaker refuses the call, and otherwise the
// context to make the call with, which carries parent's values and ends
// when parent's deadline or the store's timeout passes, whichever is first.
// The caller calls end once Redis has answered.
//
// A cancellation of parent during the call is not seen: the call still ends
// within the store's timeout. In exchange no call makes a context and a
// timer of its own: calls that begin within the same deadlineGrain share
// one deadline context, and their deadline is the store's timeout plus at
// most deadlineGrain. That is 5 of the 11 allocations of a decision, and
// about 8% of the client's CPU (BENCHMARKS.md).
func (s *Store) begin(parent context.Context) (context.Context, error) {
	if err := parent.Err(); err != nil {
		return nil, err
	}
	if !s.brk.allow() {
		s.stats.short.Add(1)
		return nil, ErrUnavailable
	}
	s.stats.calls.Add(1)
	if s.timeout <= 0 {
		return parent, nil
	}
	want := time.Now().Add(s.timeout)
	if d, ok := parent.Deadline(); ok && !d.After(want) {
		return parent, nil // parent ends first: it is the bound
	}
	d := s.deadline.Load()
	if d == nil || d.at.Before(want) || d.at.Sub(want) > deadlineGrain {
		at := want.Add(deadlineGrain)
		ctx, cancel := context.WithDeadline(context.Background(), at)
		d = &sharedDeadline{ctx: ctx, at: at, cancel: cancel}
		s.deadline.Store(d)
	}
	if parent == context.Background() || parent == context.TODO() {
		return d.ctx, nil
	}
	return valuesOf{Context: d.ctx, values: parent}, nil
}

// deadlineGrain is how long one shared deadline context serves new calls.
const deadlineGrain = time.Millisecond

// sharedDeadline is a context that ends at its deadline at, made for the
// calls that begin within one deadlineGrain.
type sharedDeadline struct {
	ctx context.Context
	at  time.Time // with the monotonic clock reading
	// cancel is never called (calls may still use ctx when a newer one
	// replaces it); ctx's own timer releases it at its deadline.
	cancel context.CancelFunc
}

// valuesOf is a context with the deadline and cancellation of Context and
// the values of values.
type valuesOf struct {
	context.Context
	values context.Context
}

func (c valuesOf) Value(key any) any { return c.values.Value(key) }

// end records the outcome err of a call begun with begin, and returns it.
func (s *Store) end(parent context.Context, err error) error {
	switch {
	case err == nil:
		s.brk.success()
		return nil
	case parent.Err() != nil:
		// The caller gave up; say nothing about Redis, but free a probe.
		s.brk.probing.Store(false)
		return err
	}
	s.stats.errors.Add(1)
	if errors.Is(err, context.DeadlineExceeded) {
		s.stats.timeouts.Add(1)
	}
	if s.brk.failure() {
		s.stats.opens.Add(1)
	}
	return err
}
