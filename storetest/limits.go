// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"fmt"
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
	if h.Store == nil || h.Clock == nil {
		t.Fatal("storetest: the harness has no Store or no Clock")
	}
	r := &rig{t: t, h: h, ctx: t.Context(), o: newOracle(t)}
	r.at(later)
	p := limitsPolicy(windowKinds[int(alg)%len(windowKinds)])
	with := func(b byte) sluice.Policy {
		q := p
		q.Limit = limitsOf[b%byte(len(limitsOf))]
		return q
	}
	if len(ops) > 300 {
		ops = ops[:300]
	}
	keys := [...]string{"a", "b"}
	for i := 0; i+2 < len(ops); i += 3 {
		step, c, b := ops[i], ops[i+1], ops[i+2]
		switch {
		case step < 0x60:
		case step < 0xa0:
			r.at(r.now + int64(step&7))
		case step < 0xf0:
			r.at(r.now + int64(step&0x3f)*int64(time.Second)/64)
		default:
			r.at(r.now + int64(step&1+1)*int64(time.Second))
		}
		key := keys[step>>3&1]
		q := with(b)
		cost := int64(c & 0x0f)
		switch c >> 4 & 3 {
		case 0, 1:
			r.check(q, key, cost)
		case 2:
			if c&0x40 != 0 {
				r.charge(q, key, cost)
			} else {
				r.peek(q, key)
			}
		default:
			// A batch on one key or two, each request with its limit.
			r.checkAll([]sluice.Request{req(q, key, cost&7), req(with(b>>3), keys[b>>6&1], cost>>3+1)})
		}
	}
	// The store holds a key exactly while its state limits someone.
	if r.h.Len != nil {
		held := 0
		for _, k := range keys {
			if r.o.expiresAt(p, k) > r.now {
				held++
			}
		}
		r.wantLen(held, "after requests of several limits")
	}
}

// testLimits runs Limits over a deterministic spread of inputs on every
// window kind.
func testLimits(t *testing.T, newHarness func(t *testing.T) Harness) {
	var buf [150]byte
	seed := uint64(7)
	for alg, a := range windowKinds {
		for trial := range 8 {
			for i := range buf {
				seed = seed*6364136223846793005 + 1442695040888963407
				buf[i] = byte(seed >> 56)
			}
			t.Run(fmt.Sprintf("%s/%d", a, trial), func(t *testing.T) {
				Limits(t, newHarness(t), uint8(alg), buf[:])
			})
		}
	}
}
