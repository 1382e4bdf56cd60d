// SPDX-License-Identifier: Apache-2.0

package model

import (
	"time"

	"github.com/sluicehq/sluice"
)

// State is the per-key state of a policy. The zero State is the idle state
// (a full bucket, empty windows) for every algorithm. Stores persist it and
// hand it back; only the models interpret it.
type State struct {
	// Time is, for the bucket kinds, the theoretical arrival time (TAT) in
	// whole nanoseconds since the Unix epoch; for fixed-window and
	// sliding-window, the start of the current window.
	Time int64
	// Frac is, for the bucket kinds, the TAT's fraction of a nanosecond in
	// units of 1/Model.Denominator().
	Frac int64
	// Count is, for the window kinds, the units admitted in the current
	// window. For sliding-log it is the running total (modulo 2⁶⁴) of the
	// units admitted before Log's first entry.
	Count int64
	// Prev is, for sliding-window, the units admitted in the previous window.
	Prev int64
	// Log is, for sliding-log, the admitted requests still inside the window,
	// oldest first.
	Log []LogEntry
}

// LogEntry is one admitted sliding-log request.
type LogEntry struct {
	// At is when the request was admitted, in nanoseconds since the epoch.
	At int64
	// Total is the running total (modulo 2⁶⁴) of units admitted up to and
	// including this request.
	Total uint64
}

// Model is a validated policy ready for evaluation: the pure algorithm. It
// never reads a clock and never does I/O; stores call Take under their own
// atomicity and supply the time. The Go models are the oracle that every
// store is tested against.
type Model struct {
	policy sluice.Policy
	kind   kind
	leaky  bool // leaky-bucket: admitted requests get a Delay
	limit  int64
	period int64
	// The emission interval Period/Limit is num/den nanoseconds, reduced.
	num, den int64
	full     capacity // the policy's own: its Capacity() and the time it drains in
	unit     rtime    // num/den: the time one unit takes to drain
	// Division by num and by period without a division instruction.
	numDiv, periodDiv divisor
	// cal draws the windows for a policy with a Calendar; nil otherwise
	// (calendar.go).
	cal *calWindows
}

// New validates p and returns its model.
func New(p sluice.Policy) (*Model, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m := &Model{policy: p, kind: kindOf(p.Algorithm), leaky: p.Algorithm == sluice.LeakyBucket, limit: p.Limit, period: int64(p.Period)}
	g := gcd(m.period, m.limit)
	m.num, m.den = m.period/g, m.limit/g
	m.full = capacity{p.Capacity(), m.dur(p.Capacity())}
	m.unit = m.dur(1)
	m.numDiv, m.periodDiv = newDivisor(m.num), newDivisor(m.period)
	m.cal = newCalendar(p.Calendar)
	return m, nil
}

// Policy returns the policy m evaluates.
func (m *Model) Policy() sluice.Policy { return m.policy }

// Denominator returns the denominator of State.Frac for the bucket kinds:
// Frac is always in [0, Denominator()).
func (m *Model) Denominator() int64 { return m.den }

// Take evaluates a request of cost units at instant now (nanoseconds since
// the Unix epoch) against state s and returns the new state and the decision.
// A rejected request, or one of cost 0 (a peek), returns s unchanged. A peek
// is admitted iff a request of cost 1 would be admitted now, and reports
// the state as it is (a refused peek's RetryAfter is that of cost 1).
//
// Instants are clamped to [0, MaxTime]. If now is earlier than the instant s
// was last updated at (a clock that stepped back), the models never admit
// more than they would have at the later instant.
//
// For sliding-log the returned state may share s.Log's backing array (it
// appends in place when there is room); a caller that keeps the new state
// must not use s again.
func (m *Model) Take(s State, now, cost int64) (State, sluice.Decision) {
	now = min(max(now, 0), MaxTime)
	if cost < 0 {
		return s, sluice.Decision{Limit: m.limit, Impossible: true}
	}
	switch m.kind {
	case fixedKind:
		return m.fixedWindow(s, now, cost, m.limit)
	case slidingKind:
		return m.slidingWindow(s, now, cost, m.limit)
	case logKind:
		return m.slidingLog(s, now, cost, m.limit)
	default:
		return m.bucket(s, now, cost, m.full)
	}
}

// TakeBurst is Take under burst in place of the policy's Burst (0 means
// Limit, as in sluice.Policy): the state and decision of the model of the
// same policy with Burst = burst, on the same state, without making that
// model. For the bucket kinds that is the capacity a request is judged
// against (sluice.Check.Burst); the TAT, its grid and its expiry do not
// depend on it, so policies that differ only in Burst share a key's state.
// The window kinds have no burst and ignore it. burst must be one that
// sluice.Policy.Validate accepts for the policy; otherwise the result is
// unspecified.
func (m *Model) TakeBurst(s State, now, cost, burst int64) (State, sluice.Decision) {
	now = min(max(now, 0), MaxTime)
	if cost < 0 {
		return s, sluice.Decision{Limit: m.limit, Impossible: true}
	}
	// Take's dispatch, written out again: a call of Take (or of a shared
	// body) from here would pass its results through one more frame, which
	// cost a decision about 13 ns (BenchmarkModelTake).
	switch m.kind {
	case fixedKind:
		return m.fixedWindow(s, now, cost, m.limit)
	case slidingKind:
		return m.slidingWindow(s, now, cost, m.limit)
	case logKind:
		return m.slidingLog(s, now, cost, m.limit)
	default:
		return m.bucket(s, now, cost, m.capacity(burst))
	}
}

// capacity is a bucket's capacity as its arithmetic uses it: the burst B
// and the time B·T a full bucket takes to drain.
type capacity struct {
	units int64
	span  rtime
}

// capacity returns the capacity of the policy with Burst = burst (0 means
// Limit): the policy's own, precomputed, unless a bucket kind's burst
// differs from it.
func (m *Model) capacity(burst int64) capacity {
	if burst == m.policy.Burst {
		return m.full
	}
	return m.other(burst)
}

// other is capacity for a Burst other than the policy's.
func (m *Model) other(burst int64) capacity {
	if burst == 0 {
		burst = m.limit
	}
	if burst == m.full.units || m.kind != bucketKind {
		return m.full
	}
	return capacity{burst, m.dur(burst)}
}

// ExpiresAt returns the instant (nanoseconds since the epoch) from which s is
// equivalent to the zero State: a store may forget the key then, and must not
// forget it before. An idle state returns a time no later than any it has
// seen.
func (m *Model) ExpiresAt(s State) int64 {
	switch m.kind {
	case fixedKind:
		return m.fixedExpiry(s.Time, s.Count)
	case slidingKind:
		return m.slidingExpiry(s.Time, s.Count, s.Prev)
	case logKind:
		if n := len(s.Log); n > 0 {
			return s.Log[n-1].At + m.period
		}
		return 0
	default:
		return rtime{s.Time, s.Frac}.ceil()
	}
}

// fixedExpiry is ExpiresAt of a fixed-window state.
func (m *Model) fixedExpiry(start, count int64) int64 {
	if count > 0 {
		if m.cal != nil {
			return m.cal.window(start).End
		}
		return start + m.period
	}
	return 0
}

// slidingExpiry is ExpiresAt of a sliding-window state.
func (m *Model) slidingExpiry(start, count, prev int64) int64 {
	if m.cal != nil && (count > 0 || prev > 0) {
		w := m.cal.window(start)
		if count > 0 {
			return w.Next
		}
		return w.End
	}
	switch {
	case count > 0:
		return start + 2*m.period
	case prev > 0:
		return start + m.period
	}
	return 0
}

// MaxTime is the latest instant, in nanoseconds since the Unix epoch (the
// year 2116), that the models accept; stores clamp their clock to [0,
// MaxTime]. With sluice.MaxPeriod and sluice.MaxLimit it keeps every
// intermediate value of the models' arithmetic inside int64.
const MaxTime = 1 << 62

// kind groups the algorithms by the model that evaluates them.
type kind uint8

const (
	bucketKind kind = iota // token-bucket, gcra, leaky-bucket
	fixedKind
	slidingKind
	logKind
)

func kindOf(a sluice.Algorithm) kind {
	switch a {
	case sluice.FixedWindow:
		return fixedKind
	case sluice.SlidingWindow:
		return slidingKind
	case sluice.SlidingLog:
		return logKind
	}
	return bucketKind
}

// IdleAfter returns the longest time any key can take to return to idle
// after its last admission: the longest a store must remember a key.
func (m *Model) IdleAfter() time.Duration {
	if m.cal != nil && m.kind == fixedKind {
		return time.Duration(m.cal.longest())
	} else if m.cal != nil {
		return time.Duration(2 * m.cal.longest())
	}
	switch m.policy.Algorithm {
	case sluice.FixedWindow, sluice.SlidingLog:
		return time.Duration(m.period)
	case sluice.SlidingWindow:
		return time.Duration(2 * m.period)
	default:
		return time.Duration(m.full.span.ceil())
	}
}
