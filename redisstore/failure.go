// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"errors"
	"fmt"
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
	// DefaultTimeout is the ceiling on one call to Redis: the bound when the
	// caller has no deadline or a later one. It is generous on purpose: a
	// healthy Redis on a busy host can take tens of milliseconds to answer
	// now and then (a CPU to run on), and a whole process can stall for
	// over a second on an overloaded one (measured: three serve processes
	// under the race detector beside other test suites, load average 25 on
	// 2 CPUs); neither is a failure of Redis. A caller that needs an answer
	// sooner says so with its context's deadline (Envoy's gRPC deadline, an
	// HTTP request's); see WithDeadlineMargin. 3 s is also the common read
	// timeout of Redis clients.
	DefaultTimeout = 3 * time.Second
	// DefaultDeadlineMargin is the fixed part of how long before the
	// caller's deadline a call to Redis is given up, to leave time to
	// answer the caller; a tenth of the time the caller has left is added
	// (WithDeadlineMargin).
	DefaultDeadlineMargin = 2 * time.Millisecond
	// DefaultBreakerFailures is the number of consecutive failures that
	// open the circuit breaker. Calls in flight together that fail together
	// (a stall) count once: a failure counts only if its call began after
	// the last counted one.
	DefaultBreakerFailures = 5
	// DefaultBreakerCooldown is how long the breaker stays open before it
	// lets one probe call through.
	DefaultBreakerCooldown = 200 * time.Millisecond
)

// WithTimeout sets the ceiling d on each call to Redis: a call is bounded by
// the caller's deadline less the margin (WithDeadlineMargin) or by d,
// whichever is sooner. The bound is d plus at most a millisecond, since calls
// that begin within the same millisecond share one deadline; a caller's
// cancellation is seen before the call and not during it. d ≤ 0 means no
// ceiling beyond the caller's context. The default is DefaultTimeout.
//
// A call that runs out of d counts as a failure of Redis (Stats.Timeouts,
// and toward the circuit breaker); a call that runs out of the caller's
// deadline does not (Stats.CallerTimeouts): the caller was in a hurry, Redis
// was not necessarily unwell.
//
// A call that times out after Redis ran the script may have consumed
// capacity without reporting an admission: failures err on the side of
// limiting.
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithDeadlineMargin sets how long before the caller's deadline a call to
// Redis is given up: d plus a tenth of the time the caller has left when the
// call begins (default DefaultDeadlineMargin), so that the caller gets an
// answer (its failure mode's) before its deadline rather than none, even
// when the answer waits a while for a CPU. For Envoy's default rate limit
// timeout of 20 ms that leaves Redis 16 ms. The margin is kept only when
// what it leaves Redis is at least d: a caller with a shorter deadline (at
// the default, under about 4.4 ms) gets its call bounded by its own
// deadline, so it gets Redis's decision or, once its deadline has passed,
// an error that no failure mode turns into an admission (its context has
// ended). So a short deadline, which a gRPC client sets for itself, is
// never a way around the limit: a failure mode answers only when Redis has
// had at least d and not answered. d ≤ 0 means no margin at all (the
// caller's own deadline bounds every call).
func WithDeadlineMargin(d time.Duration) Option {
	return func(s *Store) { s.margin = max(d, 0) }
}

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

// WithRecovered sets f to be called each time the circuit breaker closes
// again, because a call to Redis succeeded after it had opened: Redis is
// back. failing is how long Redis had been failing, from the first of the
// failures in a row that opened the breaker to that success. f runs in the
// call that closed the breaker, once per closing, so it must return soon
// (a log line). It is never called with the breaker disabled.
func WithRecovered(f func(failing time.Duration)) Option {
	return func(s *Store) { s.recovered = f }
}

// Stats counts what a store has done since it was created.
type Stats struct {
	// Calls is the number of calls to Redis (one per Take or TakeAll that
	// got past validation and the breaker; Takes gathered into one script
	// call count one each).
	Calls uint64
	// Errors is the number of those calls that failed (including timeouts).
	Errors uint64
	// Timeouts is the number of calls that ran out of the store's timeout
	// (WithTimeout).
	Timeouts uint64
	// CallerTimeouts is the number of calls given up at the caller's
	// deadline less the margin (WithDeadlineMargin), or not made because
	// less than the margin was left. They are not counted in Errors and do
	// not move the circuit breaker.
	CallerTimeouts uint64
	// HeartbeatTimeouts is the number of replica heartbeats (Replicas'
	// Beat and Leave) given up at their own deadline: Run bounds each beat
	// by the heartbeat interval. A beat is no caller, so it is not counted
	// in CallerTimeouts; nor in Errors, and it does not move the circuit
	// breaker.
	HeartbeatTimeouts uint64
	// ShortCircuited is the number of Take and TakeAll calls refused at
	// once with ErrUnavailable because the breaker was open.
	ShortCircuited uint64
	// BreakerOpens is the number of times the breaker opened: went from
	// closed to open. A probe that fails while it is open keeps it open
	// and is not counted, so one outage counts once however long it lasts.
	BreakerOpens uint64
	// DialErrors counts failed attempts to connect to Redis: Open's first
	// connection (made on demand when Redis was down at the start) and
	// every reconnection after a connection was lost, as when Redis has
	// died and its port refuses. A connection refused or timed out, or
	// whose TLS handshake failed, counts, and so does a first connection
	// Redis turned away (a wrong password, a database out of range). A
	// client made by the caller (New) dials on its own and is not counted.
	DialErrors uint64
	// BreakerOpen is true while the circuit breaker is open: calls fail at
	// once with ErrUnavailable, but for one probe after each cooldown.
	BreakerOpen bool
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		Calls:             s.stats.calls.Load(),
		Errors:            s.stats.errors.Load(),
		Timeouts:          s.stats.timeouts.Load(),
		CallerTimeouts:    s.stats.callerTimeouts.Load(),
		HeartbeatTimeouts: s.stats.heartbeatTimeouts.Load(),
		ShortCircuited:    s.stats.short.Load(),
		BreakerOpens:      s.stats.opens.Load(),
		DialErrors:        s.stats.dialErrors.Load(),
		BreakerOpen:       s.brk.threshold > 0 && s.brk.openUntil.Load() != 0,
	}
}

type counters struct {
	calls, errors, timeouts, callerTimeouts, heartbeatTimeouts, short, opens, dialErrors atomic.Uint64
}

// breaker is a lock-free circuit breaker. It counts failed episodes, not
// failed calls: a failure counts only if its call began after the last
// counted failure, so the calls in flight together when Redis (or this
// process) stalls count once, and the breaker opens after threshold
// failures that each followed the last.
type breaker struct {
	threshold int32
	cooldown  time.Duration
	failures  atomic.Int32
	lastFail  atomic.Int64 // unix ns of the last counted failure
	since     atomic.Int64 // unix ns of the first of the failures in a row
	openUntil atomic.Int64 // unix ns; 0: closed
	probing   atomic.Bool
	clock     func() int64 // unix ns; nil: the wall clock (tests set it)
}

// now reads the breaker's clock.
func (b *breaker) now() int64 {
	if b.clock != nil {
		return b.clock()
	}
	return time.Now().UnixNano()
}

// allow reports whether a call may go to Redis now.
func (b *breaker) allow() bool {
	u := b.openUntil.Load()
	if u == 0 || b.threshold <= 0 {
		return true
	}
	if b.now() < u {
		return false
	}
	return b.probing.CompareAndSwap(false, true) // one probe at a time
}

// success records a call that succeeded. If it closed the breaker, closed
// is true and failing is how long Redis had been failing: since the first
// of the failures in a row that opened it.
func (b *breaker) success() (failing time.Duration, closed bool) {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if u := b.openUntil.Load(); u != 0 && b.openUntil.CompareAndSwap(u, 0) {
		b.probing.Store(false)
		return time.Duration(b.now() - b.since.Load()), true
	}
	return 0, false
}

// failure records a failed call that began at start (unix ns) and reports
// whether it opened the breaker: moved it from closed to open. A failed
// probe keeps the breaker open for another cooldown and reports false.
func (b *breaker) failure(start int64) bool {
	if b.threshold <= 0 {
		return false
	}
	now := b.now()
	last := b.lastFail.Load()
	if start < last && !b.probing.Load() {
		return false // in flight with the last counted failure: the same episode
	}
	b.lastFail.Store(now)
	n := b.failures.Add(1)
	if n == 1 {
		b.since.Store(now)
	}
	if n >= b.threshold || b.probing.Load() {
		was := b.openUntil.Swap(now + int64(b.cooldown))
		b.probing.Store(false)
		return was == 0
	}
	return false
}

// call runs f against Redis under the timeout, the breaker and the counters.
// parent is the caller's context: its own cancellation is not a Redis
// failure.
func (s *Store) call(parent context.Context, f func(ctx context.Context) error) error {
	_, err := callV(s, parent, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// begin starts a call to Redis: it returns parent's error if parent is
// already done, ErrUnavailable if the breaker refuses the call, and otherwise
// the context to make the call with, which carries parent's values and ends
// when parent's deadline less the margin or the store's timeout passes,
// whichever is first (parent itself when its deadline less the margin
// would leave Redis less than the margin: see WithDeadlineMargin); c records when the call began and
// whether its bound is the caller's. The caller calls end once Redis has
// answered.
//
// The context does not end when parent is cancelled: the caller stops
// waiting then (await), and the call ends within its bound. In exchange
// no call makes a context and a timer of its own: calls that begin within
// the same deadlineGrain share one deadline context (one for the store's timeout, one for callers' deadlines), and the
// store's timeout is exceeded by at most deadlineGrain; a caller's deadline
// less the margin never is (its call may end up to deadlineGrain sooner).
// That is 5 of the 11 allocations of a decision, and about 8% of the
// client's CPU (BENCHMARKS.md).
func (s *Store) begin(parent context.Context) (ctx context.Context, c callStart, err error) {
	if err := parent.Err(); err != nil {
		return nil, c, err
	}
	now := time.Now()
	cd, hasDeadline := parent.Deadline()
	if hasDeadline && s.margin > 0 {
		cd = cd.Add(-s.margin - cd.Sub(now)/10)
	}
	if !s.brk.allow() {
		s.stats.short.Add(1)
		return nil, c, ErrUnavailable
	}
	s.stats.calls.Add(1)
	c.at = now.UnixNano()
	if hasDeadline && cd.Sub(now) < s.margin {
		// The caller's deadline less the margin would leave Redis less
		// than the margin: a bound the caller chose, not a slow Redis,
		// would decide the call. So the failure mode gets no time, and
		// the caller's own deadline bounds the call.
		c.byCaller, c.own = true, true
		return parent, c, nil
	}
	want := now.Add(s.timeout)
	if hasDeadline && (s.timeout <= 0 || !cd.After(want)) {
		// The caller's deadline less the margin is the bound.
		if s.margin == 0 {
			c.byCaller, c.own = true, true
			return parent, c, nil
		}
		d := s.callerDeadline.Load()
		if d == nil || d.at.After(cd) || cd.Sub(d.at) > deadlineGrain {
			d = newSharedDeadline(cd)
			s.callerDeadline.Store(d)
		}
		c.byCaller = true
		return withValues(d.ctx, parent), c, nil
	}
	if s.timeout <= 0 {
		return parent, c, nil
	}
	d := s.deadline.Load()
	if d == nil || d.at.Before(want) || d.at.Sub(want) > deadlineGrain {
		d = newSharedDeadline(want.Add(deadlineGrain))
		s.deadline.Store(d)
	}
	return withValues(d.ctx, parent), c, nil
}

// waitBound returns a channel that is closed when a wait for a call made on
// the caller's behalf by another goroutine must end: the caller's deadline
// less the margin, as begin bounds a call (nil, never, when there is no
// deadline, no margin, or it would leave less than the margin: then the
// caller's own deadline ends the wait); and a func that frees its timer.
func (s *Store) waitBound(ctx context.Context) (<-chan time.Time, func()) {
	cd, ok := ctx.Deadline()
	if !ok || s.margin <= 0 {
		return nil, func() {}
	}
	now := time.Now()
	cd = cd.Add(-s.margin - cd.Sub(now)/10)
	if cd.Sub(now) < s.margin {
		return nil, func() {}
	}
	t := time.NewTimer(cd.Sub(now))
	return t.C, func() { t.Stop() }
}

// callStart is what end needs to know of a call begun by begin.
type callStart struct {
	at       int64 // unix ns
	byCaller bool  // bounded by the caller's deadline less the margin
	own      bool  // bounded by the caller's deadline itself
}

// withValues is ctx with the values of parent.
func withValues(ctx, parent context.Context) context.Context {
	if parent == context.Background() || parent == context.TODO() {
		return ctx
	}
	return valuesOf{Context: ctx, values: parent}
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

func newSharedDeadline(at time.Time) *sharedDeadline {
	ctx, cancel := context.WithDeadline(context.Background(), at)
	return &sharedDeadline{ctx: ctx, at: at, cancel: cancel}
}

// valuesOf is a context with the deadline and cancellation of Context and
// the values of values.
type valuesOf struct {
	context.Context
	values context.Context
}

func (c valuesOf) Value(key any) any { return c.values.Value(key) }

// end records the outcome err of a call begun with begin, and returns it.
// c is begin's.
func (s *Store) end(parent context.Context, c callStart, err error) error {
	if err != nil && c.own && parent.Err() == nil {
		if d, _ := parent.Deadline(); !time.Now().Before(d) {
			// The call failed at the caller's deadline (the connection's
			// own deadline, or the dial's, can come before the context's
			// timer): wait for the context to end, so that the caller,
			// and the Limiter, see that it did.
			<-parent.Done()
		}
	}
	switch {
	case err == nil:
		if failing, closed := s.brk.success(); closed && s.recovered != nil {
			s.recovered(failing)
		}
		return nil
	case s.closed.Load():
		// Close ended the call (it closes the client Open made), or came
		// while the call was failing: never a reason to admit, and nothing
		// said about Redis.
		s.brk.probing.Store(false)
		if errors.Is(err, errClosed) {
			return err
		}
		return fmt.Errorf("%w (during the call: %v)", errClosed, err)
	case parent.Err() != nil || (c.byCaller && errors.Is(err, context.DeadlineExceeded)):
		// The caller gave up, or its deadline (less the margin) came: say
		// nothing about Redis, but free a probe. A deadline counts as a
		// caller timeout whether the margin or the deadline itself was
		// reached first (a loaded host runs timers late). A replica
		// heartbeat's deadline is its own, not a caller's.
		switch {
		case errors.Is(parent.Err(), context.Canceled):
		case parent.Value(heartbeatCall{}) != nil:
			s.stats.heartbeatTimeouts.Add(1)
		default:
			s.stats.callerTimeouts.Add(1)
		}
		s.brk.probing.Store(false)
		return err
	}
	s.stats.errors.Add(1)
	if errors.Is(err, context.DeadlineExceeded) {
		s.stats.timeouts.Add(1)
	}
	if s.brk.failure(c.at) {
		s.stats.opens.Add(1)
	}
	return err
}
