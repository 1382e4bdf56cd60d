// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// variants is the body of Bursts and Limits: it drives h's store with
// requests of the named policy p, each under the variant with(b) of p
// (another Burst, another Limit) for a byte b of ops: takes, peeks,
// charges and two-request batches on two keys. Every decision must equal
// the model's for that request's policy, on the key's one state, and the
// store must hold exactly the keys whose state has not expired. what
// names the variants in messages.
func variants(t *testing.T, h Harness, p sluice.Policy, with func(b byte) sluice.Policy, what string, ops []byte) {
	t.Helper()
	if h.Store == nil || h.Clock == nil {
		t.Fatal("storetest: the harness has no Store or no Clock")
	}
	r := &rig{t: t, h: h, ctx: t.Context(), o: newOracle(t)}
	r.at(later)
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
			// A batch on one key or two, each request with its variant.
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
		r.wantLen(held, "after requests of several "+what)
	}
}

// testVariants runs run over a deterministic spread of inputs from seed on
// every algorithm of kinds (run's alg indexes it).
func testVariants(t *testing.T, newHarness func(t *testing.T) Harness, kinds []sluice.Algorithm, seed uint64, run func(t *testing.T, h Harness, alg uint8, ops []byte)) {
	var buf [150]byte
	for alg, a := range kinds {
		for trial := range 8 {
			for i := range buf {
				seed = seed*6364136223846793005 + 1442695040888963407
				buf[i] = byte(seed >> 56)
			}
			t.Run(fmt.Sprintf("%s/%d", a, trial), func(t *testing.T) {
				run(t, newHarness(t), uint8(alg), buf[:])
			})
		}
	}
}
