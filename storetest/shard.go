// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/shard"
)

// shardCases are the policies the shard oracle drives, with remainders in
// both limit and burst.
var shardCases = []struct {
	p sluice.Policy
	n int
}{
	{sluice.Policy{Name: "shard-tb", Algorithm: sluice.TokenBucket, Limit: 50, Period: time.Second, Burst: 20}, 3},
	{sluice.Policy{Name: "shard-gcra", Algorithm: sluice.GCRA, Limit: 7, Period: 300 * time.Millisecond}, 2},
	{sluice.Policy{Name: "shard-fw", Algorithm: sluice.FixedWindow, Limit: 40, Period: time.Second}, 3},
	{sluice.Policy{Name: "shard-sw", Algorithm: sluice.SlidingWindow, Limit: 30, Period: time.Second}, 4},
	{sluice.Policy{Name: "shard-sl", Algorithm: sluice.SlidingLog, Limit: 20, Period: time.Second}, 3},
}

// ShardKey returns the store key of shard i of key under the shard policy
// p, as a sharded Limiter names it.
func ShardKey(s sluice.Store, p sluice.Policy, key string, i, n int) string {
	if k, ok := s.(shard.Keyer); ok {
		return k.ShardKey(p, key, i, n)
	}
	return key + "~" + strconv.Itoa(i)
}

// Shards is the shard oracle: three replicas (Limiters over shard.New stores) share
// one store and a fake clock and decide random arrivals, with costs that
// exceed a shard's capacity now and then. Every admitted request, replayed
// at its instant through the exact model of the whole policy, must be
// admitted (shards never over-admit); every refusal must be one that each
// shard makes (a peek at every shard finds fewer units than the cost); a
// cost above every shard's capacity is Impossible; and a refusal's
// RetryAfter is exact for the sharded key: one nanosecond earlier is
// refused, at RetryAfter it is admitted.
func Shards(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, tc := range shardCases {
		p, n := tc.p, tc.n
		t.Run(string(p.Algorithm), func(t *testing.T) {
			h := newHarness(t)
			h.Clock.Set(time.Unix(2_000_000, 0))
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(p.Limit), 11))
			lims := make([]*sluice.Limiter, 3)
			for i := range lims {
				l, err := sluice.NewLimiter(shard.New(h.Store, n), p)
				if err != nil {
					t.Fatal(err)
				}
				lims[i] = l
			}
			parts := shard.Policies(p, n)
			var sum, sumBurst, maxCap int64
			for _, q := range parts {
				if err := q.Validate(); err != nil {
					t.Fatal(err)
				}
				sum += q.Limit
				c := q.Limit
				if q.Algorithm.IsBucket() {
					c = q.Burst
					sumBurst += q.Burst
				}
				maxCap = max(maxCap, c)
			}
			if sum != p.Limit || p.Algorithm.IsBucket() && sumBurst != p.Burst && !(p.Burst == 0 && sumBurst == p.Limit) {
				t.Fatalf("shard limits sum to %d (bursts %d), want %d (%d)", sum, sumBurst, p.Limit, p.Burst)
			}
			// A cost no shard can hold is impossible.
			if d, err := lims[0].AllowN(ctx, "hot", maxCap+1); err != nil || !d.Impossible || d.Allowed || d.RetryAfter != 0 {
				t.Errorf("cost %d (more than any shard holds): %+v, %v; want Impossible", maxCap+1, d, err)
			}
			type ev struct {
				at, cost int64
				key      string
				d        sluice.Decision
			}
			var evs []ev
			var refused, early, early1 int64
			for i := range 3000 {
				mean := p.Period / time.Duration(p.Limit) / 3
				if i/400%2 == 1 {
					mean *= 4
				}
				h.Clock.Advance(time.Duration(rng.ExpFloat64() * float64(mean)))
				key := []string{"hot", "warm"}[min(rng.IntN(4), 1)]
				cost := int64(1)
				if rng.IntN(6) == 0 {
					cost = 1 + rng.Int64N(maxCap)
				}
				l := lims[rng.IntN(len(lims))]
				var peek sluice.Decision
				if cost == 1 {
					// A peek first, at the same instant: it answers as
					// the request does.
					var err error
					if peek, err = l.AllowN(ctx, key, 0); err != nil {
						t.Fatal(err)
					}
				}
				d, err := l.AllowN(ctx, key, cost)
				if err != nil {
					t.Fatal(err)
				}
				if cost == 1 && peek.Allowed != d.Allowed {
					t.Fatalf("request %d (%s): a peek answered admitted %v, the request of cost 1 right after %v", i, key, peek.Allowed, d.Allowed)
				}
				now := h.Clock.Now().UnixNano()
				evs = append(evs, ev{now, cost, key, d})
				if d.Allowed || d.Impossible {
					continue
				}
				refused++
				// Every shard refuses it now.
				for j, q := range parts {
					pk, err := h.Store.Take(ctx, q, ShardKey(h.Store, q, key, j, n), 0)
					if err != nil {
						t.Fatal(err)
					}
					if pk.Remaining >= cost {
						t.Fatalf("request %d (cost %d) refused while shard %d has %d units", i, cost, j, pk.Remaining)
					}
				}
			}
			m, err := model.New(p)
			if err != nil {
				t.Fatal(err)
			}
			state := map[string]model.State{}
			var admitted int64
			for i, e := range evs {
				st := state[e.key]
				next, d := m.Take(st, e.at, e.cost)
				if e.d.Allowed {
					if !d.Allowed {
						t.Fatalf("request %d (%s, cost %d): admitted by a shard, refused by the exact model", i, e.key, e.cost)
					}
					state[e.key] = next
					admitted += e.cost
				} else if d.Allowed {
					early++
					if e.cost == 1 {
						early1++
					}
				}
			}
			if admitted == 0 || refused == 0 {
				t.Errorf("a degenerate run: %d units admitted, %d refusals", admitted, refused)
			}
			t.Logf("%d requests: %d units admitted (all exact), %d refused, %d of them admissible by one exact key (%d of cost 1)", len(evs), admitted, refused, early, early1)

			// RetryAfter on a quiet key: exact for the sharded key.
			h.Clock.Advance(10 * p.Period)
			var d sluice.Decision
			for range p.Limit + 1 {
				if d, err = lims[0].Allow(ctx, "quiet"); err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					break
				}
			}
			if d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("the quiet key was not refused after %d requests: %+v", p.Limit+1, d)
			}
			h.Clock.Advance(d.RetryAfter - 1)
			if e, err := lims[1].Allow(ctx, "quiet"); err != nil || e.Allowed {
				t.Errorf("admitted 1 ns before RetryAfter %v: %+v %v", d.RetryAfter, e, err)
			}
			h.Clock.Advance(1)
			if e, err := lims[2].Allow(ctx, "quiet"); err != nil || !e.Allowed {
				t.Errorf("refused at RetryAfter %v: %+v %v", d.RetryAfter, e, err)
			}
		})
	}
}
