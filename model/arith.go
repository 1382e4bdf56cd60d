// SPDX-License-Identifier: Apache-2.0

package model

import "math/bits"

// Exact integer arithmetic for the models. Products of a count and a duration
// can exceed 64 bits, so they are formed in 128 bits and divided back down.

// mul64 returns a×b as a 128-bit value.
func mul64(a, b uint64) (hi, lo uint64) { return bits.Mul64(a, b) }

// quo128 returns ⌊(hi,lo)/d⌋, saturated at the largest uint64 when the
// quotient does not fit.
func quo128(hi, lo, d uint64) uint64 {
	if hi >= d {
		return ^uint64(0)
	}
	q, _ := bits.Div64(hi, lo, d)
	return q
}

// divmod128 returns ⌊(hi,lo)/d⌋ and the remainder; the caller guarantees
// that the quotient fits (hi < d).
func divmod128(hi, lo, d uint64) (q, r uint64) { return bits.Div64(hi, lo, d) }

// cmp128 compares two 128-bit values: -1, 0 or +1.
func cmp128(ahi, alo, bhi, blo uint64) int {
	switch {
	case ahi < bhi:
		return -1
	case ahi > bhi:
		return 1
	case alo < blo:
		return -1
	case alo > blo:
		return 1
	}
	return 0
}

// sub128 returns a−b for a ≥ b.
func sub128(ahi, alo, bhi, blo uint64) (hi, lo uint64) {
	lo, borrow := bits.Sub64(alo, blo, 0)
	hi, _ = bits.Sub64(ahi, bhi, borrow)
	return hi, lo
}

// add128 returns a+b as 128 bits (the callers' operands cannot overflow it).
func add128(ahi, alo, b uint64) (hi, lo uint64) {
	lo, carry := bits.Add64(alo, b, 0)
	return ahi + carry, lo
}

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// rtime is an instant or a span in nanoseconds with an exact fraction: ns +
// frac/den, 0 ≤ frac < den, where den is the model's denominator. The bucket
// kinds need it because the emission interval Period/Limit is rarely a whole
// number of nanoseconds.
type rtime struct{ ns, frac int64 }

func (a rtime) less(b rtime) bool { return a.ns < b.ns || a.ns == b.ns && a.frac < b.frac }

// ceil returns the first whole nanosecond at or after a.
func (a rtime) ceil() int64 {
	if a.frac > 0 {
		return a.ns + 1
	}
	return a.ns
}

func (m *Model) add(a, b rtime) rtime {
	a.ns += b.ns
	a.frac += b.frac
	if a.frac >= m.den {
		a.frac -= m.den
		a.ns++
	}
	return a
}

// sub returns a−b for a ≥ b.
func (m *Model) sub(a, b rtime) rtime {
	a.ns -= b.ns
	a.frac -= b.frac
	if a.frac < 0 {
		a.frac += m.den
		a.ns--
	}
	return a
}

// dur returns the exact time k units take to drain: k×Period/Limit.
// k ≤ burst, so the whole part fits (it is at most sluice.MaxPeriod).
func (m *Model) dur(k int64) rtime {
	if m.den == 1 { // a whole number of nanoseconds per unit
		return rtime{k * m.num, 0}
	}
	hi, lo := mul64(uint64(k), uint64(m.num))
	q, r := divmod128(hi, lo, uint64(m.den))
	return rtime{int64(q), int64(r)}
}

// units returns the whole units that drain in span a: ⌊a×Limit/Period⌋.
func (m *Model) units(a rtime) int64 {
	if m.den == 1 {
		return m.numDiv.div(a.ns)
	}
	hi, lo := mul64(uint64(a.ns), uint64(m.den))
	hi, lo = add128(hi, lo, uint64(a.frac))
	return int64(quo128(hi, lo, uint64(m.num)))
}

// divisor divides non-negative int64s by a fixed positive d with a multiply
// and a shift instead of a division instruction, exactly (Granlund and
// Montgomery, "Division by invariant integers using multiplication", 1994,
// theorem 4.2, for 63-bit dividends). With l = ⌈log₂ d⌉ and
// m = ⌈2^(63+l)/d⌉, which fits in 64 bits, m·d − 2^(63+l) < d ≤ 2^l, so
// ⌊n/d⌋ = ⌊m·n / 2^(63+l)⌋ for every 0 ≤ n < 2^63.
type divisor struct {
	m     uint64
	shift uint8 // l − 1; unused when d = 1
	one   bool  // d = 1
}

func newDivisor(d int64) divisor {
	if d == 1 {
		return divisor{one: true}
	}
	l := uint(bits.Len64(uint64(d) - 1)) // ⌈log₂ d⌉ ≥ 1
	// m = ⌈2^(63+l)/d⌉; 2^(63+l) is (hi, lo) = (2^(l−1), 0), and hi < d.
	q, r := bits.Div64(1<<(l-1), 0, uint64(d))
	if r != 0 {
		q++
	}
	return divisor{m: q, shift: uint8(l - 1)}
}

// div returns ⌊n/d⌋ for 0 ≤ n.
func (v divisor) div(n int64) int64 {
	if v.one {
		return n
	}
	hi, _ := bits.Mul64(v.m, uint64(n))
	return int64(hi >> v.shift)
}
