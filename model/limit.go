// SPDX-License-Identifier: Apache-2.0

package model

import "github.com/sluicehq/sluice"

// TakeLimit is Take under limit in place of the policy's Limit, for the
// window kinds: the state and decision of the model of the same policy
// with Limit = limit, on the same state, without making that model. A
// window's state (its start, counts, log) and its expiry do not depend on
// the limit, which only bounds what a request may take and what the
// decision reports (Limit, Remaining, RetryAfter, Debt); so policies that
// differ only in Limit share a key's state, as a descriptor's limit
// override shares the count of the rule it overrides. The bucket kinds,
// whose Limit is their grid, ignore it and decide as Take. limit must be
// one that sluice.Policy.Validate accepts for the policy; otherwise the
// result is unspecified.
func (m *Model) TakeLimit(s State, now, cost, limit int64) (State, sluice.Decision) {
	now = min(max(now, 0), MaxTime)
	if m.kind == bucketKind {
		limit = m.limit
	}
	if cost < 0 {
		return s, sluice.Decision{Limit: limit, Impossible: true}
	}
	switch m.kind {
	case fixedKind:
		return m.fixedWindow(s, now, cost, limit)
	case slidingKind:
		return m.slidingWindow(s, now, cost, limit)
	case logKind:
		return m.slidingLog(s, now, cost, limit)
	default:
		return m.bucket(s, now, cost, m.full)
	}
}

// ChargeLimit is Charge under limit in place of the policy's Limit, as
// TakeLimit is Take: the charge records cost as Charge does (a window's
// state does not depend on the limit), and the peek after it is judged
// under limit. The bucket kinds ignore it.
func (m *Model) ChargeLimit(s State, now, cost, limit int64) (State, sluice.Decision) {
	if m.kind == bucketKind || limit == m.limit {
		return m.Charge(s, now, cost)
	}
	if cost <= 0 {
		return m.TakeLimit(s, now, cost, limit)
	}
	s, _ = m.Charge(s, now, cost)
	_, d := m.TakeLimit(s, now, 0, limit)
	return s, d
}

// TakeFixedWindowLimit is TakeFixedWindow under limit in place of the
// policy's Limit, as TakeLimit is Take. The expiry does not depend on it.
func (m *Model) TakeFixedWindowLimit(start, count *int64, now, cost, limit int64, d *sluice.Decision) (expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: limit, Impossible: true}
	} else {
		m.takeFixed(start, count, min(max(now, 0), MaxTime), cost, limit, d)
	}
	return m.fixedExpiry(*start, *count)
}

// TakeSlidingWindowLimit is TakeSlidingWindow under limit in place of the
// policy's Limit, as TakeLimit is Take. The expiry does not depend on it.
func (m *Model) TakeSlidingWindowLimit(start, count, prev *int64, now, cost, limit int64, d *sluice.Decision) (expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: limit, Impossible: true}
	} else {
		m.takeSliding(start, count, prev, min(max(now, 0), MaxTime), cost, limit, d)
	}
	return m.slidingExpiry(*start, *count, *prev)
}

// TakeSlidingLogLimit is TakeSlidingLog under limit in place of the
// policy's Limit, as TakeLimit is Take. The expiry does not depend on it.
func (m *Model) TakeSlidingLogLimit(base int64, log []LogEntry, now, cost, limit int64, d *sluice.Decision) (_ []LogEntry, expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: limit, Impossible: true}
		return log, m.ExpiresAt(State{Count: base, Log: log})
	}
	return m.takeLog(uint64(base), log, min(max(now, 0), MaxTime), cost, limit, d)
}

// JudgeSlidingLogLimit is JudgeSlidingLog under limit in place of the
// policy's Limit, as TakeLimit is Take.
func (m *Model) JudgeSlidingLogLimit(base int64, log []LogEntry, now, cost, limit int64, d *sluice.Decision) (expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: limit, Impossible: true}
		return m.ExpiresAt(State{Count: base, Log: log})
	}
	_, _, expires = m.judgeLog(uint64(base), log, min(max(now, 0), MaxTime), cost, limit, d)
	return expires
}
