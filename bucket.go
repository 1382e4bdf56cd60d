// SPDX-License-Identifier: Apache-2.0

package sluice

import "time"

// bucket is the model of token-bucket, gcra and leaky-bucket: one
// theoretical arrival time (TAT). With emission interval T = Period/Limit, a
// request of cost c at t is admitted iff max(TAT, t) + c·T − t ≤ Burst·T, and
// then TAT = max(TAT, t) + c·T. The bucket holds Burst−⌈(TAT−t)/T⌉ tokens.
// The leaky-bucket queue admits exactly the same requests; an admitted
// request waits max(0, TAT−t), the TAT before it, to be released.
func (m *Model) bucket(s State, now, cost int64) (State, Decision) {
	d := Decision{Limit: m.limit}
	tat := rtime{s.Time, s.Frac}
	t := rtime{now, 0}
	if tat.less(t) {
		tat = t
	}
	debt := m.sub(tat, t) // time until the bucket is full again
	d.Remaining = m.room(debt)
	d.ResetAfter = time.Duration(debt.ceil())
	switch {
	case cost > m.burst:
		d.Impossible = true
		return s, d
	case cost == 0: // a peek: always admitted, changes nothing
		d.Allowed = true
		if m.leaky {
			d.Delay = time.Duration(debt.ceil())
		}
		return s, d
	}
	next := m.add(tat, m.dur(cost))
	limit := m.add(t, m.burstDur)
	if limit.less(next) {
		// Rejected: admitted from the first instant at which
		// next − Burst·T ≤ t', which is after now and no later than the TAT.
		d.RetryAfter = time.Duration(m.sub(next, m.burstDur).ceil() - now)
		return s, d
	}
	d.Allowed = true
	if m.leaky {
		d.Delay = time.Duration(debt.ceil())
	}
	newDebt := m.sub(next, t)
	d.Remaining = m.room(newDebt)
	d.ResetAfter = time.Duration(newDebt.ceil())
	s.Time, s.Frac = next.ns, next.frac
	return s, d
}

// room returns the whole units a bucket with the given debt can still
// admit. The debt exceeds Burst·T only when the state was written under
// other parameters (a reconfigured named policy) or at a later instant (a
// clock that stepped back): no room then.
func (m *Model) room(debt rtime) int64 {
	if m.burstDur.less(debt) {
		return 0
	}
	return m.units(m.sub(m.burstDur, debt))
}
