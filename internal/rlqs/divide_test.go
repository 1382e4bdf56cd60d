// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestDivide(t *testing.T) {
	for _, c := range []struct {
		budget int64
		wants  []int64
		want   []int64
	}{
		{100, nil, []int64{}},
		{100, []int64{10}, []int64{10}},
		{100, []int64{Unknown}, []int64{100}},
		{100, []int64{Unknown, Unknown, Unknown}, []int64{34, 33, 33}},
		{100, []int64{23, 45, 169, 338}, []int64{23, 26, 26, 25}},
		{100, []int64{12, 23, 34}, []int64{12, 23, 34}},
		{100, []int64{6, 6, 6, 338}, []int64{6, 6, 6, 82}},
		{2, []int64{5, 5, 5}, []int64{1, 1, 0}},
		{0, []int64{5}, []int64{0}},
		{100, []int64{0, 200}, []int64{0, 100}},
	} {
		ids := make([]string, len(c.wants))
		for i := range ids {
			ids[i] = fmt.Sprint(i)
		}
		if got := Divide(c.budget, c.wants, ids); !slices.Equal(got, c.want) {
			t.Errorf("Divide(%d, %v) = %v, want %v", c.budget, c.wants, got, c.want)
		}
	}
}

// TestDivideMaxMin checks, on random claims, that shares sum to at most the
// budget (exactly the budget when the wants exceed it), that nobody gets
// more than it wants, and that a claimant that gets less than it wants gets
// at least as much as anyone else, less one for the remainder.
func TestDivideMaxMin(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + r.IntN(8)
		budget := r.Int64N(300)
		wants := make([]int64, n)
		ids := make([]string, n)
		var sum int64
		unbounded := false
		for i := range wants {
			ids[i] = fmt.Sprint(r.IntN(1000))
			if r.IntN(5) == 0 {
				wants[i] = Unknown
				unbounded = true
			} else {
				wants[i] = r.Int64N(150)
				sum += wants[i]
			}
		}
		got := Divide(budget, wants, ids)
		var total int64
		for i, g := range got {
			total += g
			if wants[i] >= 0 && g > wants[i] {
				t.Fatalf("Divide(%d, %v) = %v: %d gets more than it wants", budget, wants, got, i)
			}
		}
		if total > budget || (unbounded || sum > budget) && total != budget || !unbounded && sum <= budget && total != sum {
			t.Fatalf("Divide(%d, %v) = %v: total %d", budget, wants, got, total)
		}
		for i, g := range got {
			if wants[i] >= 0 && g == wants[i] {
				continue
			}
			for j, h := range got {
				if h > g+1 {
					t.Fatalf("Divide(%d, %v) = %v: %d is short of its want with %d while %d gets %d", budget, wants, got, i, g, j, h)
				}
			}
		}
	}
}

func TestWant(t *testing.T) {
	for _, c := range []struct {
		demand float64
		fill   int64
		want   int64
	}{
		{-1, 1, Unknown},
		{0, 1, 1},
		{5, 1, 6},
		{20, 1, 23},
		{300, 1, 338},
		{1, 60, 68},
	} {
		if got := want(c.demand, c.fill); got != c.want {
			t.Errorf("want(%v, %d) = %d, want %d", c.demand, c.fill, got, c.want)
		}
	}
}
