// SPDX-License-Identifier: Apache-2.0

package sluice

import "time"

// slidingLog admits iff the units admitted in (t−P, t] plus c are at most
// Limit: an entry exactly P old has left.
func (m *Model) slidingLog(s State, now, cost int64) (State, Decision) {
	d := Decision{Limit: m.limit}
	// Entries still inside the window: At > now − P.
	k := firstAfter(s.Log, now-m.period)
	base := uint64(s.Count)
	if k > 0 {
		base = s.Log[k-1].Total
	}
	live := s.Log[k:]
	var used int64
	if n := len(live); n > 0 {
		used = int64(live[n-1].Total - base)
	}
	d.Remaining = max(0, m.limit-used) // used > limit: written under a larger limit
	if n := len(live); n > 0 {
		d.ResetAfter = time.Duration(live[n-1].At + m.period - now)
	}
	switch {
	case cost > m.limit:
		d.Impossible = true
		return s, d
	case cost > 0 && used+cost > m.limit:
		// The request fits once enough of the oldest entries have left:
		// the first j with Total(last) − Total(j) ≤ Limit − cost leaves at
		// At(j) + P.
		last := live[len(live)-1].Total
		j := firstWithin(live, last, m.limit-cost)
		d.RetryAfter = time.Duration(live[j].At + m.period - now)
		return s, d
	}
	d.Allowed = true
	if cost == 0 {
		return s, d
	}
	d.Remaining -= cost
	at := now
	if n := len(live); n > 0 && live[n-1].At > at {
		at = live[n-1].At // a clock that stepped back: keep the log ordered
	}
	used += cost
	d.ResetAfter = time.Duration(at + m.period - now)
	return State{Count: int64(base), Log: append(live, LogEntry{At: at, Total: base + uint64(used)})}, d
}

// firstAfter returns the index of the first entry of log (ordered by At)
// with At > t, or len(log). It is sort.Search without the closure call per
// step, which the hot path cannot afford.
func firstAfter(log []LogEntry, t int64) int {
	lo, hi := 0, len(log)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if log[m].At > t {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// firstWithin returns the index of the first entry of log with
// last − Total ≤ room (Totals increase along the log), or len(log).
func firstWithin(log []LogEntry, last uint64, room int64) int {
	lo, hi := 0, len(log)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int64(last-log[m].Total) <= room {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}
