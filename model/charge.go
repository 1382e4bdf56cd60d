// SPDX-License-Identifier: Apache-2.0

package model

import (
	"math"

	"github.com/sluicehq/sluice"
)

// Charge records cost units that have already been spent (LLM tokens counted
// after the response, bytes sent) at instant now, even past the limit, and
// returns the new state and the decision a peek (cost 0) makes on it right
// after: Allowed reports whether the key still admits a request of cost 1,
// and a refused peek's RetryAfter is when it will again. A charge that
// takes the key past its limit leaves it in debt: it refuses until the debt
// is paid back. What that means per algorithm:
//
//   - token-bucket, gcra, leaky-bucket: the TAT moves by cost·T as for an
//     admission, past now + Burst·T if need be: the bucket is negative and
//     refuses until it has refilled above one unit; the leaky-bucket queue
//     releases its next request only after the charged units have drained.
//   - fixed-window: the window's count goes above the limit; the key
//     refuses until the window ends (the debt is not carried over).
//   - sliding-window: the current window's count goes above the limit, and
//     weighs on the next window as any count does, by its overlap.
//   - sliding-log: an entry of the whole cost is logged; the sum stays over
//     the limit until enough entries have aged out.
//
// Costs are bounded so that no state overflows: a bucket's charge moves the
// TAT by at most sluice.MaxPeriod and never past MaxTime + sluice.MaxPeriod;
// a window's count (or a log's live sum) saturates at math.MaxInt64. A cost
// of 0 is a peek; a negative cost is rejected as Impossible, as by Take.
//
// For sliding-log the returned state may share s.Log's backing array, as
// with Take.
func (m *Model) Charge(s State, now, cost int64) (State, sluice.Decision) {
	if cost <= 0 {
		return m.Take(s, now, cost)
	}
	now = min(max(now, 0), MaxTime)
	switch m.kind {
	case fixedKind:
		start := max(now, s.Time) // a clock that stepped back stays in the newest window
		ws := m.periodDiv.div(start) * m.period
		if m.cal != nil {
			ws = m.cal.window(start).Start
		}
		n := int64(0)
		if s.Time == ws {
			n = s.Count
		}
		s = State{Time: ws, Count: satAdd(n, cost)}
	case slidingKind:
		start := max(now, s.Time)
		ws := m.periodDiv.div(start) * m.period
		pws := ws - m.period
		if m.cal != nil {
			w := m.cal.window(start)
			ws, pws = w.Start, w.Prev
		}
		var cur, prev int64
		switch s.Time {
		case ws:
			cur, prev = s.Count, s.Prev
		case pws:
			prev = s.Count
		}
		s = State{Time: ws, Count: satAdd(cur, cost), Prev: prev}
	case logKind:
		base, log := uint64(s.Count), s.Log
		if k := firstAfter(log, now-m.period); k > 0 {
			base, log = log[k-1].Total, log[k:]
		}
		at, used := now, int64(0)
		if n := len(log); n > 0 {
			used = int64(log[n-1].Total - base)
			at = max(at, log[n-1].At) // a clock that stepped back: keep the log ordered
		}
		// Saturated, the entry records what is left to MaxInt64 (maybe
		// nothing): a charge always appends one entry.
		log = append(log, LogEntry{At: at, Total: base + uint64(used+min(cost, math.MaxInt64-used))})
		s = State{Count: int64(base), Log: log}
	default:
		s.Time, s.Frac = m.chargeTAT(s.Time, s.Frac, now, cost)
	}
	_, d := m.Take(s, now, 0)
	return s, d
}

// ChargeBurst is Charge under burst in place of the policy's Burst (0
// means Limit), as TakeBurst is Take: the charge moves the TAT as Charge
// does, and the peek after it is judged under burst.
func (m *Model) ChargeBurst(s State, now, cost, burst int64) (State, sluice.Decision) {
	if m.kind != bucketKind || burst == m.policy.Burst {
		return m.Charge(s, now, cost) // the window kinds have no burst
	}
	if cost <= 0 {
		return m.TakeBurst(s, now, cost, burst)
	}
	s.Time, s.Frac = m.chargeTAT(s.Time, s.Frac, min(max(now, 0), MaxTime), cost)
	_, d := m.TakeBurst(s, now, 0, burst)
	return s, d
}

// chargeTAT returns a bucket's TAT (ns, frac) after a charge of cost > 0
// at now (clamped): max(TAT, now) moved by ChargeSpan(cost), capped at
// MaxTime + sluice.MaxPeriod.
func (m *Model) chargeTAT(ns, frac, now, cost int64) (int64, int64) {
	tat := rtime{ns, frac}
	if t := (rtime{now, 0}); tat.less(t) {
		tat = t
	}
	span, spanFrac := m.ChargeSpan(cost)
	tat = m.add(tat, rtime{span, spanFrac})
	if limit := (rtime{MaxTime + int64(sluice.MaxPeriod), 0}); limit.less(tat) {
		tat = limit
	}
	return tat.ns, tat.frac
}

// ChargeSpan returns, for the bucket kinds, how far a charge of units moves
// the TAT: units·Period/Limit as whole nanoseconds and a fraction in units
// of 1/Denominator(), capped at sluice.MaxPeriod (with no fraction). A
// store that evaluates Charge itself (a script) moves the TAT by exactly
// this much, and caps it as Charge documents.
func (m *Model) ChargeSpan(units int64) (ns, frac int64) {
	const most = int64(sluice.MaxPeriod)
	if units <= 0 {
		return 0, 0
	}
	hi, lo := mul64(uint64(units), uint64(m.num))
	if hi >= uint64(m.den) {
		return most, 0
	}
	q, r := divmod128(hi, lo, uint64(m.den))
	if q > uint64(most) || q == uint64(most) && r > 0 {
		return most, 0
	}
	return int64(q), int64(r)
}

// satAdd returns a+b for a, b ≥ 0, saturated at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
