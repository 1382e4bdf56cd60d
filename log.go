// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"sort"
	"time"
)

// slidingLog admits iff the units admitted in (t−P, t] plus c are at most
// Limit: an entry exactly P old has left.
func (m *Model) slidingLog(s State, now, cost int64) (State, Decision) {
	d := Decision{Limit: m.limit}
	// Entries still inside the window: At > now − P.
	k := sort.Search(len(s.Log), func(i int) bool { return s.Log[i].At > now-m.period })
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
		j := sort.Search(len(live), func(i int) bool { return int64(last-live[i].Total) <= m.limit-cost })
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
