// SPDX-License-Identifier: Apache-2.0

package sluice

import "time"

// fixedWindow admits iff count(window) + c ≤ Limit, with windows aligned to
// multiples of Period since the Unix epoch.
func (m *Model) fixedWindow(s State, now, cost int64) (State, Decision) {
	d := Decision{Limit: m.limit}
	now = max(now, s.Time) // a clock that stepped back stays in the newest window
	start := floorDiv(now, m.period) * m.period
	end := start + m.period
	var count int64
	if s.Time == start {
		count = s.Count
	}
	reset := func(count int64) time.Duration {
		if count == 0 {
			return 0
		}
		return time.Duration(end - now)
	}
	switch {
	case cost > m.limit:
		d.Impossible = true
	case cost > 0 && count+cost > m.limit:
		d.RetryAfter = time.Duration(end - now)
	default:
		d.Allowed = true
		d.Remaining = max(0, m.limit-count-cost)
		d.ResetAfter = reset(count + cost)
		if cost > 0 {
			s = State{Time: start, Count: count + cost}
		}
		return s, d
	}
	d.Remaining = max(0, m.limit-count) // count > limit: written under a larger limit
	d.ResetAfter = reset(count)
	return s, d
}

// slidingWindow admits iff prev·(P−e)/P + cur + c ≤ Limit, where e is the
// time since the current aligned window began; compared exactly as
// prev·(P−e) + (cur+c)·P ≤ Limit·P in 128 bits.
func (m *Model) slidingWindow(s State, now, cost int64) (State, Decision) {
	d := Decision{Limit: m.limit}
	now = max(now, s.Time)
	p := m.period
	start := floorDiv(now, p) * p
	var cur, prev int64
	switch s.Time {
	case start:
		cur, prev = s.Count, s.Prev
	case start - p:
		prev = s.Count
	}
	e := now - start
	d.Remaining = m.slidingRoom(prev, cur, e)
	d.ResetAfter = slidingReset(prev, cur, start+p-now, p)
	switch {
	case cost > m.limit:
		d.Impossible = true
		return s, d
	case cost > d.Remaining:
		d.RetryAfter = time.Duration(m.slidingRetry(prev, cur, e, cost))
		return s, d
	}
	d.Allowed = true
	if cost == 0 {
		return s, d
	}
	d.Remaining = m.slidingRoom(prev, cur+cost, e)
	d.ResetAfter = slidingReset(prev, cur+cost, start+p-now, p)
	return State{Time: start, Count: cur + cost, Prev: prev}, d
}

// slidingRoom returns the whole units admissible at e into the window:
// ⌊((Limit−cur)·P − prev·(P−e)) / P⌋, at least 0.
func (m *Model) slidingRoom(prev, cur, e int64) int64 {
	if cur >= m.limit {
		return 0
	}
	p := uint64(m.period)
	ahi, alo := mul64(uint64(m.limit-cur), p)
	bhi, blo := mul64(uint64(prev), p-uint64(e))
	if cmp128(ahi, alo, bhi, blo) <= 0 {
		return 0
	}
	hi, lo := sub128(ahi, alo, bhi, blo)
	return int64(quo128(hi, lo, p))
}

// slidingReset returns the time until both windows' counts weigh nothing;
// left is the time until the current window ends.
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
// prev·(P−e') ≤ (Limit−cur−cost)·P, in this window or a later one.
func (m *Model) slidingRetry(prev, cur, e, cost int64) int64 {
	p := m.period
	// In window w (0: this one), with counts (prev, cur), the first offset
	// at which cost fits, or p if none.
	first := func(prev, cur int64) int64 {
		room := m.limit - cur - cost
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
	if at := max(first(prev, cur), e); at < p {
		return at - e
	}
	if at := first(cur, 0); at < p {
		return p + at - e
	}
	return 2*p - e
}
