// SPDX-License-Identifier: Apache-2.0

package shard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// The capabilities a shard.Store forwards (see sluice.Store).
var (
	_ sluice.Refunder    = (*shard.Store)(nil)
	_ lease.Giver        = (*shard.Store)(nil)
	_ shard.Keyer        = (*shard.Store)(nil)
	_ inflight.Semaphore = (*shard.Store)(nil)
)

// bare is a store with only the methods of sluice.Store: no capability.
type bare struct{ sluice.Store }

// TestWrapper: a shard.Store forwards every capability of the store it
// wraps (Binder, Refunder, lease.Giver, shard.Keyer, inflight.Semaphore)
// for a policy it does not shard, with the neutral answer over a store that
// lacks one (the sluice.Store doc), over memstore, a memstore with no
// capability and a real Redis. Before, it was no Keyer (a shard.Store over
// it named sub-keys key~i over Redis) and no Semaphore.
func TestWrapper(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	four := func(p sluice.Policy) int {
		if p.Name == storetest.WrapperPolicy.Name {
			return 1
		}
		return 4
	}
	for _, name := range []string{"mem", "bare", "redis"} {
		t.Run(name, func(t *testing.T) {
			clk := sluicetest.NewClock(time.Unix(0, 0))
			var s sluice.Store
			if name == "redis" {
				rs, err := redisstore.Open("redis://"+addr, redisstore.WithClock(clk))
				if err != nil {
					t.Fatal(err)
				}
				s = rs
			} else {
				s = memstore.New(memstore.WithClock(clk))
			}
			defer s.Close()
			if name == "bare" {
				s = bare{s}
			}
			storetest.Wrapper(t, storetest.Harness{Store: s, Clock: clk}, func(s sluice.Store) sluice.Store {
				return shard.NewFunc(s, four)
			})
		})
	}
}

// TestShardOverLeaseKeys: shard.New(lease.New(redis), n) places its
// sub-keys where redisstore's Keyer puts them (in n ranges of the Cluster
// slot space), through the lease store; before, the lease store was no
// Keyer and they were key~i.
func TestShardOverLeaseKeys(t *testing.T) {
	ctx := context.Background()
	clk := sluicetest.NewClock(time.Unix(0, 0))
	rs, err := redisstore.Open("redis://"+sluicetest.StartRedis(t), redisstore.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ls := lease.New(rs, lease.WithClock(clk))
	defer ls.Close()
	const n = 3
	p := sluice.Policy{Name: "hot", Algorithm: sluice.GCRA, Limit: 30, Period: time.Second}
	lim, err := sluice.NewLimiter(shard.New(ls, n), p)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if d, err := lim.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("Allow: %+v %v", d, err)
		}
	}
	taken := int64(0)
	for i, q := range shard.Policies(p, n) {
		key := rs.ShardKey(q, "k", i, n)
		if key == fmt.Sprintf("k~%d", i) {
			t.Fatalf("redisstore's shard key %d is key~i: the test needs it to differ", i)
		}
		d, err := rs.Take(ctx, q, key, 0)
		if err != nil {
			t.Fatal(err)
		}
		taken += q.Capacity() - d.Remaining
		if d, err := rs.Take(ctx, q, fmt.Sprintf("k~%d", i), 0); err != nil || d.Remaining != q.Capacity() {
			t.Errorf("shard %d: something was taken at k~%d: %+v %v", i, i, d, err)
		}
	}
	if taken != n {
		t.Errorf("%d units taken at redisstore's shard keys, want %d", taken, n)
	}
}

// TestInFlightOverShard: an in-flight limit over a shard.Store holds its
// slots in the wrapped store (they are not sharded).
func TestInFlightOverShard(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	defer mem.Close()
	f, err := inflight.New(shard.New(mem, 4), "calls", 1)
	if err != nil {
		t.Fatal(err)
	}
	if h, s, err := f.Acquire(ctx, "k", true); err != nil || h == nil || !s.Acquired {
		t.Fatalf("first Acquire: %+v %v", s, err)
	}
	if h, s, err := f.Acquire(ctx, "k", true); err != nil || h != nil || s.Acquired {
		t.Errorf("second Acquire of a limit of 1: %+v %v; want refused", s, err)
	}
}
