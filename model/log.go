// SPDX-License-Identifier: Apache-2.0

package model

import (
	"time"

	"github.com/sluicehq/sluice"
)

// slidingLog admits iff the units admitted in (t−P, t] plus c are at most
// Limit: an entry exactly P old has left. An admission returns the log
// without the entries that have left, their units folded into Count.
func (m *Model) slidingLog(s State, now, cost, limit int64) (State, sluice.Decision) {
	var d sluice.Decision
	base, log := uint64(s.Count), s.Log
	if k := firstAfter(log, now-m.period); k > 0 {
		base, log = log[k-1].Total, log[k:]
	}
	log, _ = m.takeLog(base, log, now, cost, limit, &d)
	if !d.Allowed || cost == 0 {
		return s, d
	}
	return State{Count: int64(base), Log: log}, d
}

// takeLog is slidingLog on a state whose Count is base and Log is log,
// which may still hold entries that have left the window. On an admission
// with cost > 0 it returns log with the new entry appended (in place when
// log has room, as append does), else log itself; and ExpiresAt of the
// state base and the returned log make. It sets *d to the decision. now is
// clamped already.
func (m *Model) takeLog(base uint64, log []LogEntry, now, cost, limit int64, d *sluice.Decision) ([]LogEntry, int64) {
	total, at, expires := m.judgeLog(base, log, now, cost, limit, d)
	if !d.Allowed || cost == 0 {
		return log, expires
	}
	return append(log, LogEntry{At: at, Total: total}), expires
}

// judgeLog is takeLog without the append: it sets *d to takeLog's decision
// and writes nothing else. For a rejection or a peek, expires is ExpiresAt
// of the state as given; for an admission with cost > 0, it is that of the
// state the entry {at, total} appended to log makes.
func (m *Model) judgeLog(base uint64, log []LogEntry, now, cost, limit int64, d *sluice.Decision) (total uint64, at, expires int64) {
	*d = sluice.Decision{Limit: limit}
	// Entries still inside the window: At > now − P.
	k := firstAfter(log, now-m.period)
	if k > 0 {
		base = log[k-1].Total
	}
	live := log[k:]
	var used int64
	if n := len(live); n > 0 {
		used = int64(live[n-1].Total - base)
		d.ResetAfter = time.Duration(live[n-1].At + m.period - now)
	}
	if n := len(log); n > 0 {
		expires = log[n-1].At + m.period
	}
	d.Remaining = max(0, limit-used) // used > limit: charged, or written under a larger limit
	switch {
	case cost > limit:
		d.Impossible = true
		d.Debt = max(0, used-limit)
		return 0, 0, expires
	case max(cost, 1) > limit-used: // not used+cost: at MaxLimit that overflows; a peek is judged as cost 1
		d.Debt = max(0, used-limit)
		// The request fits once enough of the oldest entries have left:
		// the first j with Total(last) − Total(j) ≤ Limit − cost leaves at
		// At(j) + P.
		last := live[len(live)-1].Total
		j := firstWithin(live, last, limit-max(cost, 1))
		d.RetryAfter = time.Duration(live[j].At + m.period - now)
		return 0, 0, expires
	}
	d.Allowed = true
	if cost == 0 {
		return 0, 0, expires
	}
	d.Remaining -= cost
	at = now
	if n := len(live); n > 0 && live[n-1].At > at {
		at = live[n-1].At // a clock that stepped back: keep the log ordered
	}
	used += cost
	d.ResetAfter = time.Duration(at + m.period - now)
	return base + uint64(used), at, at + m.period
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
