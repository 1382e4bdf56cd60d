// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// expiryUse is one request that leaves a key's state non-idle.
type expiryUse struct {
	after time.Duration // since the previous request
	cost  int64         // -1: the policy's capacity
}

// expiryCases are the histories after which Expiry checks one key.
var expiryCases = []struct {
	name   string
	limit  int64
	period time.Duration
	burst  int64
	uses   []expiryUse
}{
	{"one", 3, time.Second, 5, []expiryUse{{0, 1}}},
	{"full", 3, time.Second, 5, []expiryUse{{0, -1}}},
	{"several", 3, time.Second, 5, []expiryUse{{0, 2}, {400 * time.Millisecond, 1}, {500 * time.Millisecond, 3}, {1, 1}}},
	{"fractional", 7, time.Minute, 3, []expiryUse{{13, 2}, {time.Second, 1}}},
	{"acrossWindows", 10, time.Second, 0, []expiryUse{{0, 4}, {time.Second, 3}, {1500 * time.Millisecond, 2}}},
}

// testExpiry checks that a key is held, and still limits, until the instant
// the model says its state has become idle, and not from that instant on.
func testExpiry(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, alg := range sluice.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			for _, c := range expiryCases {
				for _, start := range []int64{epoch, later} {
					t.Run(fmt.Sprintf("%s/start=%d", c.name, start), func(t *testing.T) {
						p := policyFor(alg, c.limit, c.period, c.burst)
						r := newRig(t, newHarness, start)
						now := start
						for _, u := range c.uses {
							now += int64(u.after)
							r.at(now)
							cost := u.cost
							if cost < 0 {
								cost = capacity(p)
							}
							r.check(p, "k", cost)
						}
						checkExpiry(r, p, "k")
					})
				}
			}
		})
	}
	t.Run("flood", func(t *testing.T) { testExpiryFlood(t, newHarness) })
}

// checkExpiry checks one used key around the instant its state expires.
func checkExpiry(r *rig, p sluice.Policy, key string) {
	r.t.Helper()
	exp := r.o.expiresAt(p, key)
	if exp <= r.now {
		r.t.Fatalf("storetest: the history left %v key %q idle (expires at %s, now %s)", p, key, fmtTime(exp), fmtTime(r.now))
	}
	r.at(exp - 1)
	r.wantLen(1, "one ns before the state expires")
	r.peek(p, key)
	if d := r.check(p, key, capacity(p)); d.Allowed {
		r.t.Fatalf("one ns before the state expires, a full-capacity request was admitted: %s", fmtDecision(d))
	}
	r.at(exp)
	r.wantLen(0, "at the instant the state expires")
	m := r.o.model(p)
	for _, cost := range []int64{0, capacity(p)} {
		_, idle := m.Take(model.State{}, exp, cost)
		if d := r.check(p, key, cost); d != idle {
			r.t.Fatalf("at the instant the state expires, cost %d: %s, but an idle key gives %s", cost, fmtDecision(d), fmtDecision(idle))
		}
	}
}

// testExpiryFlood uses many keys of every algorithm in one store, then walks
// the clock over the instants they expire: the store holds exactly the keys
// whose state has not expired.
func testExpiryFlood(t *testing.T, newHarness func(t *testing.T) Harness) {
	const keysPerPolicy = 150
	r := newRig(t, newHarness, later)
	rng := rand.New(rand.NewPCG(7, 7))
	type use struct {
		p    sluice.Policy
		key  string
		at   int64
		cost int64
	}
	var uses []use
	type pk struct {
		p   sluice.Policy
		key string
	}
	var keys []pk
	for _, alg := range sluice.Algorithms() {
		for _, p := range []sluice.Policy{policyFor(alg, 3, time.Second, 5), policyFor(alg, 7, time.Minute, 3)} {
			for i := range keysPerPolicy {
				key := fmt.Sprintf("flood-%d", i)
				keys = append(keys, pk{p, key})
				for range 1 + rng.IntN(3) {
					uses = append(uses, use{p, key, later + rng.Int64N(1000), rng.Int64N(capacity(p) + 1)})
				}
			}
		}
	}
	slices.SortStableFunc(uses, func(a, b use) int { return int(a.at - b.at) })
	for _, u := range uses {
		r.at(u.at)
		r.check(u.p, u.key, u.cost)
	}
	last := r.now
	exps := make([]int64, len(keys))
	for i, k := range keys {
		exps[i] = r.o.expiresAt(k.p, k.key)
	}
	held := func(now int64) int {
		n := 0
		for _, e := range exps {
			if e > now {
				n++
			}
		}
		return n
	}
	r.wantLen(held(last), "after the flood")
	distinct := slices.Compact(slices.Sorted(slices.Values(exps)))
	// Every instant would take too long; check about 40 of them.
	step := max(1, len(distinct)/40)
	for i := 0; i < len(distinct); i++ {
		if i%step != 0 && i != len(distinct)-1 {
			continue
		}
		e := distinct[i]
		if e <= last {
			continue // idle keys: never held
		}
		for _, at := range []int64{e - 1, e} {
			r.at(at)
			r.wantLen(held(at), fmt.Sprintf("walking the expiries (%d keys, %d still limiting)", len(keys), held(at)))
		}
	}
	r.wantLen(0, "after the last expiry")
	// The keys decide as the model says, held or not.
	for _, k := range keys {
		r.peek(k.p, k.key)
	}
}
