// SPDX-License-Identifier: Apache-2.0

package inflight_test

import (
	"testing"

	"github.com/sluicehq/sluice/inflight"
)

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
