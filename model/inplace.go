// SPDX-License-Identifier: Apache-2.0

package model

import "github.com/sluicehq/sluice"

// The models' in-place entry points, for a store that keeps a policy's state
// in its own layout (memstore keeps it in rows of a table) rather than as a
// State value. Each is the very function Take runs for its algorithm, on the
// State fields that algorithm uses, updated in place when a request with
// cost > 0 is admitted; nothing else is written. The fields are passed by
// address, except for sliding-log, whose log is passed and returned as a
// slice (see TakeSlidingLog). The decision is written to *d, so that it is
// built once where the caller wants it, and each returns ExpiresAt of the
// state it leaves. Like Take they clamp now to [0, MaxTime], and a negative
// cost is rejected as Impossible without touching the state. Calling one for
// a model of another algorithm is a programming error; the result is then
// unspecified.

// TakeBucket is Take for token-bucket, gcra and leaky-bucket, on a state
// whose Time and Frac are *tat and *frac.
func (m *Model) TakeBucket(tat, frac *int64, now, cost int64, d *sluice.Decision) (expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: m.limit, Impossible: true}
	} else {
		m.takeBucket(tat, frac, min(max(now, 0), MaxTime), cost, m.full, d)
	}
	return rtime{*tat, *frac}.ceil()
}

// TakeBucketBurst is TakeBucket under burst in place of the policy's Burst
// (0 means Limit), as TakeBurst is Take. The expiry does not depend on it.
func (m *Model) TakeBucketBurst(tat, frac *int64, now, cost, burst int64, d *sluice.Decision) (expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: m.limit, Impossible: true}
	} else {
		m.takeBucket(tat, frac, min(max(now, 0), MaxTime), cost, m.capacity(burst), d)
	}
	return rtime{*tat, *frac}.ceil()
}

// TakeFixedWindow is Take for fixed-window, on a state whose Time and Count
// are *start and *count.
func (m *Model) TakeFixedWindow(start, count *int64, now, cost int64, d *sluice.Decision) (expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: m.limit, Impossible: true}
	} else {
		m.takeFixed(start, count, min(max(now, 0), MaxTime), cost, m.limit, d)
	}
	return m.fixedExpiry(*start, *count)
}

// TakeSlidingWindow is Take for sliding-window, on a state whose Time, Count
// and Prev are *start, *count and *prev.
func (m *Model) TakeSlidingWindow(start, count, prev *int64, now, cost int64, d *sluice.Decision) (expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: m.limit, Impossible: true}
	} else {
		m.takeSliding(start, count, prev, min(max(now, 0), MaxTime), cost, m.limit, d)
	}
	return m.slidingExpiry(*start, *count, *prev)
}

// TakeSlidingLog is Take for sliding-log, on a state whose Count is base and
// Log is log. On an admission with cost > 0 it returns log with the new
// entry appended, in place when log has room (as append does), else log
// itself; nothing else is written. expires is ExpiresAt of the state base
// and the returned log make.
//
// Unlike Take, it does not drop the entries that have left the window: the
// caller does, at an admission, to hold the state Take returns (the entries
// of log with At > now − Period, and the last total before them as the
// base). Keeping them changes no decision while the clock only moves
// forward and Period stays, but would otherwise.
func (m *Model) TakeSlidingLog(base int64, log []LogEntry, now, cost int64, d *sluice.Decision) (_ []LogEntry, expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: m.limit, Impossible: true}
		return log, m.ExpiresAt(State{Count: base, Log: log})
	}
	return m.takeLog(uint64(base), log, min(max(now, 0), MaxTime), cost, m.limit, d)
}

// JudgeSlidingLog sets *d to the decision TakeSlidingLog would make on the
// same arguments, and writes nothing: not even an admitted entry. It is for
// a reader that acts only on a rejection (or a peek), deciding on a log it
// must not change; expires is then ExpiresAt of the state as given. After an
// admission with cost > 0, expires is that of the state TakeSlidingLog
// would leave.
func (m *Model) JudgeSlidingLog(base int64, log []LogEntry, now, cost int64, d *sluice.Decision) (expires int64) {
	if cost < 0 {
		*d = sluice.Decision{Limit: m.limit, Impossible: true}
		return m.ExpiresAt(State{Count: base, Log: log})
	}
	_, _, expires = m.judgeLog(uint64(base), log, min(max(now, 0), MaxTime), cost, m.limit, d)
	return expires
}
