// SPDX-License-Identifier: Apache-2.0

package inflight_test

import (
	"testing"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

// TestOutside10ReserveIsExactFloor: Limiter's doc promises R = ⌊L·f⌋
// reserved slots and non-critical requests admitted iff fewer than L − R
// are held. With L = 100 and f = 0.29 (critical_reserve: 0.29 in a gateway
// rule), R is 29 and non-critical work gets 71 slots; the float product
// 100·0.29 = 28.999999999999996 truncates to 28, and non-critical work
// gets 72.
func TestOutside10ReserveIsExactFloor(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		limit int64
		frac  float64
		want  int64 // ⌊limit·frac⌋, in decimal
	}{{100, 0.29, 29}, {100, 0.57, 57}, {90, 0.7, 63}, {50, 0.58, 29}} {
		store := memstore.New(memstore.WithSweepInterval(0))
		f := newInFlight(t, store, tc.limit, inflight.WithReserve(tc.frac))
		if got := f.Reserved(tc.limit); got != tc.want {
			t.Errorf("limit %d, reserve %v: Reserved = %d, want ⌊%d·%v⌋ = %d", tc.limit, tc.frac, got, tc.limit, tc.frac, tc.want)
		}
		n := int64(0)
		for {
			h, _, err := f.Acquire(ctx, "k", false)
			if err != nil {
				t.Fatal(err)
			}
			if h == nil {
				break
			}
			n++
		}
		if n != tc.limit-tc.want {
			t.Errorf("limit %d, reserve %v: %d non-critical requests admitted, want %d", tc.limit, tc.frac, n, tc.limit-tc.want)
		}
		store.Close()
	}
}

// TestOutside10NilConcurrencyAccessors: Concurrency's doc says a nil
// *Concurrency "has no slots, and refuses every request"; house style says
// zero values are safe and no call panics across a package boundary. Its
// Limit and InFlight panic with a nil pointer dereference (the zero
// Concurrency answers 0 and 0).
func TestOutside10NilConcurrencyAccessors(t *testing.T) {
	var c *inflight.Concurrency
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("nil Concurrency: Limit panicked: %v", p)
			}
		}()
		if n := c.Limit(); n != 0 {
			t.Errorf("nil Concurrency: Limit = %d, want 0", n)
		}
	}()
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("nil Concurrency: InFlight panicked: %v", p)
			}
		}()
		if n := c.InFlight("k"); n != 0 {
			t.Errorf("nil Concurrency: InFlight = %d, want 0", n)
		}
	}()
}
