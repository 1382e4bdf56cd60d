// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// limitsPolicy is the named policy of Limits for window algorithm alg: 7
// per second; limitsOf are the limits its requests come with (7 is the
// policy's own; some are above it, so that a key's count may run past a
// smaller limit).
func limitsPolicy(alg sluice.Algorithm) sluice.Policy {
	return sluice.Policy{Name: "limits", Algorithm: alg, Limit: 7, Period: time.Second}
}

var limitsOf = [...]int64{7, 1, 2, 3, 5, 10, 20, 7}

// windowKinds are the algorithms without a burst, in sluice.Algorithms'
// order.
var windowKinds = [...]sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow, sluice.SlidingLog}

// Limits drives h's store with requests of one named window policy whose
// Limit changes from request to request, as the limit overrides of sluice
// serve's RLS do (an override shares the count of the rule it overrides,
// under its own limit): takes, peeks, charges and two-request batches on
// two keys, decoded from ops, on algorithm alg (an index into the window
// kinds: fixed-window, sliding-window, sliding-log). Every decision must
// equal the model's for that request's policy, on the key's one state,
// and the store must hold exactly the keys whose state has not expired.
// It is the body of the stores' FuzzLimit.
func Limits(t *testing.T, h Harness, alg uint8, ops []byte) {
	t.Helper()
	p := limitsPolicy(windowKinds[int(alg)%len(windowKinds)])
	variants(t, h, p, func(b byte) sluice.Policy {
		q := p
		q.Limit = limitsOf[b%byte(len(limitsOf))]
		return q
	}, "limits", ops)
}

// testLimits runs Limits over a deterministic spread of inputs on every
// window kind.
func testLimits(t *testing.T, newHarness func(t *testing.T) Harness) {
	testVariants(t, newHarness, windowKinds[:], 7, Limits)
}
