// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"math"
	"sort"
)

// Unknown is the want of a stream whose demand is not known yet (its first
// report): it claims as much as the division gives anyone.
const Unknown = -1

// Divide divides budget among claimants max-min fairly: a claimant that
// wants no more than an equal share of what the smaller ones leave gets
// what it wants; the rest is split equally among the others. wants[i] is
// claimant i's want (Unknown for no limit), ids[i] its name; shares are
// whole units that sum to at most budget. The remainder of an equal split
// goes to the saturated claimants first in the order of their names, so
// every replica that divides the same claims gets the same shares.
func Divide(budget int64, wants []int64, ids []string) []int64 {
	n := len(wants)
	shares := make([]int64, n)
	if n == 0 || budget <= 0 {
		return shares
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	key := func(i int) int64 {
		if wants[i] < 0 {
			return math.MaxInt64
		}
		return wants[i]
	}
	sort.Slice(order, func(a, b int) bool {
		ka, kb := key(order[a]), key(order[b])
		if ka != kb {
			return ka < kb
		}
		return ids[order[a]] < ids[order[b]]
	})
	left := budget
	for k, i := range order {
		rest := int64(n - k)
		fair := left / rest
		if w := key(i); w <= fair {
			shares[i] = w
			left -= w
			continue
		}
		// Everyone from here on wants more than an equal share: split.
		sat := append([]int(nil), order[k:]...)
		sort.Slice(sat, func(a, b int) bool { return ids[sat[a]] < ids[sat[b]] })
		extra := left % rest
		for j, s := range sat {
			shares[s] = fair
			if int64(j) < extra {
				shares[s]++
			}
		}
		break
	}
	return shares
}

// want is the share, in units per fill interval, that a stream reporting
// demand requests per second asks for: its demand over the fill interval
// with headroom (an eighth more, at least one unit), so that a stream below
// its fair share is not refused by the noise of its own measurement, and at
// least one unit for a stream that reported none, so that its next request
// is not refused before it can report it. A negative demand is Unknown.
func want(demand float64, fill int64) int64 {
	if demand < 0 || math.IsNaN(demand) {
		return Unknown
	}
	w := demand * float64(fill)
	w += max(w/8, 1)
	if w >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(w))
}
