// SPDX-License-Identifier: Apache-2.0

package model

// Give returns the state of a key after units of an earlier admitted take
// are given back, and whether anything changed; stamp is the state that take
// left. Stores call it under the same atomicity as Take.
//
// Giving back is safe only where it is equivalent to the take having been
// smaller. For token-bucket and gcra that holds only while nothing else
// changed the key since (s is exactly stamp): the TAT moves back by
// units·T. For fixed-window it holds while the window is the same one and
// holds at least units: the count goes down by units. Anything else gives
// nothing back.
func (m *Model) Give(s, stamp State, units int64) (State, bool) {
	ok := m.give(&s, &stamp, units, m.full.units)
	return s, ok
}

// GiveBurst is Give under burst in place of the policy's Burst (0 means
// Limit), as TakeBurst is Take: what the model of the same policy with
// Burst = burst gives back.
func (m *Model) GiveBurst(s, stamp State, units, burst int64) (State, bool) {
	ok := m.give(&s, &stamp, units, m.capacity(burst).units)
	return s, ok
}

// give is Give on *s, in place, with the bucket's burst b. (Passing the
// State by value through one more function cost Give about 6 ns.)
func (m *Model) give(s, stamp *State, units, b int64) bool {
	if units <= 0 {
		return false
	}
	switch {
	case m.kind == bucketKind && !m.leaky:
		if s.Time != stamp.Time || s.Frac != stamp.Frac || units > b {
			return false
		}
		tat := rtime{s.Time, s.Frac}
		back := m.dur(units)
		if tat.less(back) {
			*s = State{}
			return true
		}
		tat = m.sub(tat, back)
		s.Time, s.Frac = tat.ns, tat.frac
		return true
	case m.kind == fixedKind:
		if s.Time != stamp.Time || s.Count < units {
			return false
		}
		s.Count -= units
		return true
	}
	return false
}

// Drain returns the time units take to drain at the policy's rate
// (units × Period / Limit), in nanoseconds rounded down and rounded up.
func (m *Model) Drain(units int64) (floor, ceil int64) {
	d := m.dur(units)
	return d.ns, d.ceil()
}
