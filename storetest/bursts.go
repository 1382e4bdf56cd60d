// SPDX-License-Identifier: Apache-2.0

package storetest

import (
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
// Burst changes from request to request, as sluice.Check.MaxDelay makes
// it (a leaky-bucket request's maximum delay): takes, peeks, charges and
// two-request batches on two keys, decoded from ops, on algorithm alg (an
// index into the bucket kinds: token-bucket, gcra, leaky-bucket). Every
// decision must equal the model's for that request's policy, on the key's
// one state, and the store must hold exactly the keys whose state has not
// expired. It is the body of the stores' FuzzBurst.
func Bursts(t *testing.T, h Harness, alg uint8, ops []byte) {
	t.Helper()
	p := burstsPolicy(bucketKinds[int(alg)%len(bucketKinds)])
	variants(t, h, p, func(b byte) sluice.Policy {
		q := p
		q.Burst = burstsOf[b%byte(len(burstsOf))]
		return q
	}, "bursts", ops)
}

// testBursts runs Bursts over a deterministic spread of inputs on every
// bucket kind.
func testBursts(t *testing.T, newHarness func(t *testing.T) Harness) {
	testVariants(t, newHarness, bucketKinds[:], 5, Bursts)
}
