// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// burstsPolicy is the named policy of Bursts for bucket algorithm alg: 7
// per second (an emission interval of 1/7 s, so that TATs carry
// fractions) with a burst of 12; burstsOf are the bursts its requests
// come with (0 is the Limit, 12 the policy's own).
func burstsPolicy(alg sluice.Algorithm) sluice.Policy {
	return sluice.Policy{Name: "bursts", Algorithm: alg, Limit: 7, Period: time.Second, Burst: 12}
}

var burstsOf = [...]int64{12, 0, 1, 2, 5, 9, 11, 12}

// bucketKinds are the algorithms with a burst, in sluice.Algorithms' order.
var bucketKinds = [...]sluice.Algorithm{sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket}

// Bursts drives h's store with requests of one named bucket policy whose
// Burst changes from request to request, as sluice.Check.Burst asks (a
// leaky-bucket request's maximum delay): takes, peeks, charges and
// two-request batches on two keys, decoded from ops, on algorithm alg (an
// index into the bucket kinds: token-bucket, gcra, leaky-bucket). Every
// decision must equal the model's for that request's policy, on the key's
// one state, and the store must hold exactly the keys whose state has not
// expired. It is the body of the stores' FuzzBurst.
func Bursts(t *testing.T, h Harness, alg uint8, ops []byte) {
	t.Helper()
	if h.Store == nil || h.Clock == nil {
		t.Fatal("storetest: the harness has no Store or no Clock")
	}
	r := &rig{t: t, h: h, ctx: t.Context(), o: newOracle(t)}
	r.at(later)
	p := burstsPolicy(bucketKinds[int(alg)%len(bucketKinds)])
	with := func(b byte) sluice.Policy {
		q := p
		q.Burst = burstsOf[b%byte(len(burstsOf))]
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
			// A batch on one key or two, each request with its burst.
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
		r.wantLen(held, "after requests of several bursts")
	}
}

// testBursts runs Bursts over a deterministic spread of inputs on every
// bucket kind.
func testBursts(t *testing.T, newHarness func(t *testing.T) Harness) {
	var buf [150]byte
	seed := uint64(5)
	for alg, a := range bucketKinds {
		for trial := range 8 {
			for i := range buf {
				seed = seed*6364136223846793005 + 1442695040888963407
				buf[i] = byte(seed >> 56)
			}
			t.Run(fmt.Sprintf("%s/%d", a, trial), func(t *testing.T) {
				Bursts(t, newHarness(t), uint8(alg), buf[:])
			})
		}
	}
}
