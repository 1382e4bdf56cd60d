// SPDX-License-Identifier: Apache-2.0

package inflight

import (
	"math/big"
	"math/bits"
	"strconv"
)

// reserve is a reserve fraction f, kept exact: the value of the shortest
// decimal that reads back as the float64 the caller gave
// (strconv.FormatFloat(f, 'f', -1, 64): 0.29 is 29/100, not the binary
// 0.28999999999999998), as num/den in lowest terms, 0 ≤ num < den.
// Reserved slots are ⌊L·num/den⌋ of this exact value, so 100 at 0.29
// reserves 29, where the float product 28.999999999999996 would give 28.
//
// The zero reserve is no reserve.
type reserve struct {
	num, den uint64   // den > 0 when the fraction fits in 64 bits
	big      *big.Rat // else (more than about 19 decimal places), exact
}

// newReserve returns frac, which is in [0, 1), as an exact reserve.
func newReserve(frac float64) reserve {
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(frac, 'f', -1, 64))
	if !ok || r.Sign() <= 0 {
		return reserve{} // 0 (or -0)
	}
	if r.Num().IsUint64() && r.Denom().IsUint64() {
		return reserve{num: r.Num().Uint64(), den: r.Denom().Uint64()}
	}
	return reserve{big: r}
}

// of returns ⌊l·f⌋, 0 for l ≤ 0. It is exact for every int64 l: l·num fits
// in 128 bits, and since num < den the quotient is below l, so it fits in
// 64 bits (bits.Div64's condition hi < den holds).
func (r reserve) of(l int64) int64 {
	switch {
	case l <= 0:
		return 0
	case r.big != nil:
		n := new(big.Int).Mul(big.NewInt(l), r.big.Num())
		return n.Quo(n, r.big.Denom()).Int64()
	case r.den == 0:
		return 0
	}
	hi, lo := bits.Mul64(uint64(l), r.num)
	q, _ := bits.Div64(hi, lo, r.den)
	return int64(q)
}
