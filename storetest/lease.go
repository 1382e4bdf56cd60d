// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/model"
)

// event is one request of an oracle run, as a replica decided it.
type event struct {
	at      int64 // clock, ns
	key     string
	cost    int64
	d       sluice.Decision
	heldMax int64 // the most lease units held unspent so far (all replicas)
	replica int
}

// leasePolicies are the policies the lease oracle drives: whole and
// fractional emission intervals, bursts below and at the limit, a window.
var leasePolicies = []sluice.Policy{
	{Name: "lease-tb", Algorithm: sluice.TokenBucket, Limit: 50, Period: time.Second, Burst: 20},
	{Name: "lease-gcra", Algorithm: sluice.GCRA, Limit: 7, Period: 300 * time.Millisecond},
	{Name: "lease-fw", Algorithm: sluice.FixedWindow, Limit: 40, Period: time.Second},
}

// Leases is the lease oracle: three replicas (Limiters over lease.New stores) share one
// store and a fake clock; random arrivals (bursts above the limit, quiet
// spells that refill the bucket, costs 1 to 3) go to random replicas.
// Then every request a replica admitted, at the instant it admitted it, is
// replayed through the exact model: each must be admitted there (leases
// never over-admit). Each refusal is checked against the stated bound: the
// exact model would have refused it too, or it lacks fewer units than
// lease units were held unspent (H); and its RetryAfter is never shorter
// than the exact model's.
func Leases(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, p := range leasePolicies {
		t.Run(string(p.Algorithm), func(t *testing.T) {
			h := newHarness(t)
			h.Clock.Set(time.Unix(1_000_000, 0))
			rng := rand.New(rand.NewPCG(uint64(p.Limit), 10))
			const replicas = 3
			lims := make([]*sluice.Limiter, replicas)
			leases := make([]*lease.Store, replicas)
			for i := range lims {
				leases[i] = lease.New(h.Store, lease.WithTarget(50*time.Millisecond), lease.WithClock(h.Clock))
				l, err := sluice.NewLimiter(leases[i], p)
				if err != nil {
					t.Fatal(err)
				}
				lims[i] = l
			}
			ctx := context.Background()
			held := func() (held, taken int64) {
				for _, ls := range leases {
					s := ls.Stats(p)
					held += int64(s.Taken - s.Spent)
					taken += int64(s.Taken)
				}
				return held, taken
			}
			var batches [][]event
			var heldMax, peekRefusedAdmitted int64
			keys := []string{"hot", "warm"}
			for i := range 4000 {
				// Phases of 500 steps: dense (several times the limit),
				// sparse (about the limit), and a quiet spell. A dense
				// step now and then is a batch of concurrent requests at
				// one instant.
				mean := p.Period / time.Duration(p.Limit) / 4
				n := 1
				switch {
				case i/500%3 == 1:
					mean = p.Period / time.Duration(p.Limit)
				case i%5 == 0:
					n = 6
				}
				step := time.Duration(rng.ExpFloat64() * float64(mean))
				if i%500 == 0 {
					step += p.Period * 2
				}
				h.Clock.Advance(step)
				at := h.Clock.Now().UnixNano()
				batch := make([]event, n)
				for j := range batch {
					cost := int64(1)
					if rng.IntN(8) == 0 {
						cost = 1 + rng.Int64N(3)
					}
					batch[j] = event{at: at, key: keys[min(rng.IntN(5), 1)], cost: cost, replica: rng.IntN(replicas)}
				}
				var peek sluice.Decision
				if n == 1 && batch[0].cost == 1 {
					// A peek first, at the same instant and replica: if it
					// admits, so does the request (it may refuse where the
					// request gives a lapsed block back and is admitted).
					var err error
					if peek, err = lims[batch[0].replica].AllowN(ctx, batch[0].key, 0); err != nil {
						t.Fatal(err)
					}
				}
				h0, t0 := held()
				var wg sync.WaitGroup
				errs := make([]error, n)
				for j := range batch {
					wg.Add(1)
					go func() {
						defer wg.Done()
						e := &batch[j]
						e.d, errs[j] = lims[e.replica].AllowN(ctx, e.key, e.cost)
					}()
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
				if peek.Allowed && !batch[0].d.Allowed {
					t.Fatalf("step %d (%s): a peek admitted, the request of cost 1 right after was refused: %+v", i, batch[0].key, batch[0].d)
				}
				if n == 1 && batch[0].cost == 1 && peek.Allowed != batch[0].d.Allowed {
					peekRefusedAdmitted++
				}
				// What was held during the batch: at most what was held
				// before, and all that was taken in it.
				h1, t1 := held()
				heldMax = max(heldMax, h0+t1-t0, h1)
				for j := range batch {
					batch[j].heldMax = heldMax
				}
				batches = append(batches, batch)
			}
			m, err := model.New(p)
			if err != nil {
				t.Fatal(err)
			}
			// The replay: per instant, the admitted requests of the batch
			// first (at one instant their order does not matter), then its
			// refusals; a refusal's RetryAfter is compared with the exact
			// state before the batch (the store's state at the refusal was
			// never behind it), its earliness with the state after.
			state := map[string]model.State{}
			var requests, admitted, early, exactRefused, lateRetries int64
			for i, batch := range batches {
				before := map[string]model.State{}
				for _, e := range batch {
					if _, ok := before[e.key]; !ok {
						before[e.key] = state[e.key]
					}
				}
				for _, e := range batch {
					requests++
					if !e.d.Allowed {
						continue
					}
					next, d := m.Take(state[e.key], e.at, e.cost)
					if !d.Allowed {
						t.Fatalf("step %d (replica %d, %s, cost %d, at +%v): admitted by a lease but refused by the exact model", i, e.replica, e.key, e.cost, time.Duration(e.at-batches[0][0].at))
					}
					state[e.key] = next
					admitted += e.cost
				}
				for _, e := range batch {
					if e.d.Allowed {
						continue
					}
					if _, exact := m.Take(before[e.key], e.at, e.cost); !exact.Allowed && e.d.RetryAfter < exact.RetryAfter {
						t.Errorf("step %d: RetryAfter %v, but the exact model says %v: early", i, e.d.RetryAfter, exact.RetryAfter)
					}
					_, exact := m.Take(state[e.key], e.at, e.cost)
					if !exact.Allowed {
						exactRefused++
						if e.d.RetryAfter > exact.RetryAfter {
							lateRetries++
						}
						continue
					}
					early++
					if _, peek := m.Take(state[e.key], e.at, 0); peek.Remaining >= e.cost+e.heldMax {
						t.Errorf("step %d (cost %d): refused with %d units left in the exact model, more than the cost plus the %d units leases held: beyond the bound", i, e.cost, peek.Remaining, e.heldMax)
					}
				}
			}
			var calls, local, taken, spent, returned uint64
			for _, ls := range leases {
				s := ls.Stats(p)
				calls += s.StoreCalls
				local += s.Local
				taken += s.Taken
				spent += s.Spent
				returned += s.Returned
			}
			if admitted == 0 || local == 0 || early == requests {
				t.Errorf("a degenerate run: %d units admitted, %d local decisions", admitted, local)
			}
			if _, ok := h.Store.(lease.Giver); ok && returned == 0 {
				t.Errorf("the store is a lease.Giver, but no unspent unit went back")
			}
			t.Logf("%d requests: %d units admitted (all exact), %d refused as the exact model does (%d with a later RetryAfter), %d refused early within the bound; %d store calls, %d local decisions; leases took %d units, spent %d, returned %d; %d peeks refused before a request admitted after giving a lapsed block back",
				requests, admitted, exactRefused, lateRetries, early, calls, local, taken, spent, returned, peekRefusedAdmitted)
		})
	}
}
