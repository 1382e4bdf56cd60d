// SPDX-License-Identifier: Apache-2.0

package model

import (
	"math/bits"
	"time"

	"github.com/sluicehq/sluice"
)

// fixedWindow admits iff count(window) + c ≤ Limit, with windows aligned to
// multiples of Period since the Unix epoch.
func (m *Model) fixedWindow(s State, now, cost, limit int64) (State, sluice.Decision) {
	var d sluice.Decision
	m.takeFixed(&s.Time, &s.Count, now, cost, limit, &d)
	if d.Allowed && cost > 0 {
		s.Frac, s.Prev, s.Log = 0, 0, nil
	}
	return s, d
}

// takeFixed is fixedWindow on the state's (Time, Count) at (*start, *count),
// which it updates in place when the request is admitted with cost > 0; it
// sets *d to the decision. now is clamped already.
func (m *Model) takeFixed(start, count *int64, now, cost, limit int64, d *sluice.Decision) {
	*d = sluice.Decision{Limit: limit}
	now = max(now, *start)                // a clock that stepped back stays in the newest window
	ws := m.periodDiv.div(now) * m.period // now ≥ 0: the aligned window start
	end := ws + m.period
	if m.cal != nil {
		w := m.cal.window(now)
		ws, end = w.Start, w.End
	}
	var n int64
	if *start == ws {
		n = *count
	}
	switch {
	case cost > limit:
		d.Impossible = true
	case max(cost, 1) > limit-n: // not n+cost: at MaxLimit that overflows; a peek is judged as cost 1
		d.RetryAfter = time.Duration(end - now)
	default:
		d.Allowed = true
		d.Remaining = max(0, limit-n-cost)
		if n+cost > 0 {
			d.ResetAfter = time.Duration(end - now)
		}
		if cost > 0 {
			*start, *count = ws, n+cost
		}
		return
	}
	d.Remaining = max(0, limit-n) // n > limit: charged, or written under a larger limit
	d.Debt = max(0, n-limit)
	if n > 0 {
		d.ResetAfter = time.Duration(end - now)
	}
}

// slidingWindow admits iff prev·(P−e)/P + cur + c ≤ Limit, where e is the
// time since the current aligned window began; compared exactly as
// prev·(P−e) + (cur+c)·P ≤ Limit·P in 128 bits.
func (m *Model) slidingWindow(s State, now, cost, limit int64) (State, sluice.Decision) {
	var d sluice.Decision
	m.takeSliding(&s.Time, &s.Count, &s.Prev, now, cost, limit, &d)
	if d.Allowed && cost > 0 {
		s.Frac, s.Log = 0, nil
	}
	return s, d
}

// takeSliding is slidingWindow on the state's (Time, Count, Prev) at
// (*start, *count, *prev), which it updates in place when the request is
// admitted with cost > 0; it sets *d to the decision. now is clamped already.
func (m *Model) takeSliding(start, count, prevp *int64, now, cost, limit int64, d *sluice.Decision) {
	*d = sluice.Decision{Limit: limit}
	now = max(now, *start)
	// The current window [ws, ws+p), the previous one's start, and the
	// next one's length: all Period unless a calendar draws them.
	p := m.period
	ws := m.periodDiv.div(now) * p // now ≥ 0: the aligned window start
	pws, pn := ws-p, p
	if m.cal != nil {
		w := m.cal.window(now)
		ws, p, pws, pn = w.Start, w.End-w.Start, w.Prev, w.Next-w.End
	}
	var cur, prev int64
	switch *start {
	case ws:
		cur, prev = *count, *prevp
	case pws:
		prev = *count
	}
	e := now - ws
	d.Remaining = m.slidingRoom(prev, cur, e, p, limit)
	d.ResetAfter = slidingReset(prev, cur, ws+p-now, pn)
	switch {
	case cost > limit:
		d.Impossible = true
		d.Debt = m.slidingOwed(prev, cur, e, p, limit)
		return
	case max(cost, 1) > d.Remaining: // a peek is judged as cost 1
		d.RetryAfter = time.Duration(m.slidingRetry(prev, cur, e, max(cost, 1), p, pn, limit))
		d.Debt = m.slidingOwed(prev, cur, e, p, limit)
		return
	}
	d.Allowed = true
	if cost == 0 {
		return
	}
	d.Remaining = m.slidingRoom(prev, cur+cost, e, p, limit)
	d.ResetAfter = slidingReset(prev, cur+cost, ws+p-now, pn)
	*start, *count, *prevp = ws, cur+cost, prev
}

// slidingRoom returns the whole units admissible at e into the window of
// length P: ⌊((Limit−cur)·P − prev·(P−e)) / P⌋, at least 0.
func (m *Model) slidingRoom(prev, cur, e, period, limit int64) int64 {
	if cur >= limit {
		return 0
	}
	p := uint64(period)
	ahi, alo := mul64(uint64(limit-cur), p)
	bhi, blo := mul64(uint64(prev), p-uint64(e))
	if cmp128(ahi, alo, bhi, blo) <= 0 {
		return 0
	}
	hi, lo := sub128(ahi, alo, bhi, blo)
	return int64(quo128(hi, lo, p))
}

// slidingOwed returns the whole units by which the weighted count runs past
// the limit at e into the window of length P: ⌊(prev·(P−e) + (cur−Limit)·P)
// / P⌋, at least 0.
func (m *Model) slidingOwed(prev, cur, e, period, limit int64) int64 {
	if prev == 0 && cur <= limit {
		return 0 // the common refusal: nothing charged past the limit
	}
	p := uint64(period)
	ahi, alo := mul64(uint64(prev), p-uint64(e))
	if cur >= limit {
		bhi, blo := mul64(uint64(cur-limit), p)
		lo, carry := bits.Add64(alo, blo, 0)
		if hi := ahi + bhi + carry; hi != 0 || lo >= p { // < 2^125: no overflow
			return int64(quo128(hi, lo, p))
		}
		return 0 // less than a unit: no division
	}
	bhi, blo := mul64(uint64(limit-cur), p)
	if cmp128(ahi, alo, bhi, blo) <= 0 {
		return 0
	}
	hi, lo := sub128(ahi, alo, bhi, blo)
	return int64(quo128(hi, lo, p))
}

// slidingReset returns the time until both windows' counts weigh nothing;
// left is the time until the current window ends, p the next one's length.
func slidingReset(prev, cur, left, p int64) time.Duration {
	switch {
	case cur > 0:
		return time.Duration(left + p)
	case prev > 0:
		return time.Duration(left)
	}
	return 0
}

// slidingRetry returns the shortest wait after which cost units are
// admitted at e into the window, given cost ≤ Limit. The weight of the
// previous window falls as e grows, so the answer is the first e' with
// prev·(P−e') ≤ (Limit−cur−cost)·P, in this window (of length pc) or a
// later one (the next of length pn).
func (m *Model) slidingRetry(prev, cur, e, cost, pc, pn, limit int64) int64 {
	// In a window of length p with counts (prev, cur), the first offset at
	// which cost fits, or p if none.
	first := func(prev, cur, p int64) int64 {
		room := limit - cur - cost
		if room < 0 {
			return p
		}
		if prev == 0 {
			return 0
		}
		// e' = P − ⌊room·P/prev⌋
		hi, lo := mul64(uint64(room), uint64(p))
		q := quo128(hi, lo, uint64(prev))
		if q >= uint64(p) {
			return 0
		}
		return p - int64(q)
	}
	if at := max(first(prev, cur, pc), e); at < pc {
		return at - e
	}
	if at := first(cur, 0, pn); at < pn {
		return pc + at - e
	}
	return pc + pn - e
}
