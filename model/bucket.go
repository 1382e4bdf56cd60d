// SPDX-License-Identifier: Apache-2.0

package model

import (
	"time"

	"github.com/sluicehq/sluice"
)

// bucket is the model of token-bucket, gcra and leaky-bucket: one
// theoretical arrival time (TAT). With emission interval T = Period/Limit, a
// request of cost c at t is admitted iff max(TAT, t) + c·T − t ≤ Burst·T, and
// then TAT = max(TAT, t) + c·T. The bucket holds Burst−⌈(TAT−t)/T⌉ tokens.
// The leaky-bucket queue admits exactly the same requests; an admitted
// request waits max(0, TAT−t), the TAT before it, to be released. Burst
// is b.units and Burst·T is b.span: the policy's own, or the burst a
// request is decided under (TakeBurst).
func (m *Model) bucket(s State, now, cost int64, b capacity) (State, sluice.Decision) {
	var d sluice.Decision
	m.takeBucket(&s.Time, &s.Frac, now, cost, b, &d)
	return s, d
}

// takeBucket is bucket on the TAT alone, (*ns, *frac), which it updates in
// place when the request is admitted with cost > 0; it sets *d to the
// decision. now is clamped already.
func (m *Model) takeBucket(ns, frac *int64, now, cost int64, b capacity, d *sluice.Decision) {
	*d = sluice.Decision{Limit: m.limit}
	tat := rtime{*ns, *frac}
	t := rtime{now, 0}
	if tat.less(t) {
		tat = t
	}
	debt := m.sub(tat, t) // time until the bucket is full again
	if cost > b.units {
		d.Remaining = m.room(debt, b)
		d.ResetAfter = time.Duration(debt.ceil())
		d.Impossible = true
		d.Debt = m.owed(debt, b)
		return
	}
	step := m.unit // a peek (cost 0) is judged as cost 1 and changes nothing
	if cost > 1 {
		step = m.dur(cost)
	}
	// next − t = debt + c·T: admitted iff that is at most Burst·T.
	newDebt := m.add(debt, step)
	if b.span.less(newDebt) {
		// Rejected: admitted from the first instant at which
		// next − Burst·T ≤ t', which is after now and no later than the TAT.
		d.Remaining = m.room(debt, b)
		d.ResetAfter = time.Duration(debt.ceil())
		d.RetryAfter = time.Duration(m.sub(m.add(tat, step), b.span).ceil() - now)
		d.Debt = m.owed(debt, b)
		return
	}
	d.Allowed = true
	if m.leaky {
		d.Delay = time.Duration(debt.ceil())
	}
	if cost == 0 {
		d.Remaining = m.room(debt, b)
		d.ResetAfter = time.Duration(debt.ceil())
		return
	}
	d.Remaining = m.units(m.sub(b.span, newDebt))
	d.ResetAfter = time.Duration(newDebt.ceil())
	next := m.add(tat, step)
	*ns, *frac = next.ns, next.frac
}

// owed returns the whole units by which a bucket with the given debt (the
// time until it is full again) runs past its burst: ⌊(debt − Burst·T)/T⌋,
// 0 when it does not.
func (m *Model) owed(debt rtime, b capacity) int64 {
	if !b.span.less(debt) {
		return 0
	}
	return m.units(m.sub(debt, b.span))
}

// room returns the whole units a bucket with the given debt can still
// admit. The debt exceeds Burst·T only when the state was written under
// other parameters (a reconfigured named policy, a request of a larger
// burst) or at a later instant (a clock that stepped back): no room then.
func (m *Model) room(debt rtime, b capacity) int64 {
	if b.span.less(debt) {
		return 0
	}
	return m.units(m.sub(b.span, debt))
}
