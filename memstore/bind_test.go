// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestBoundMatchesTake: Limiters over a store (which bind their policies)
// decide exactly as Store.Take does on a second store with the same clock,
// also while two limiters of one named policy with different limits take
// turns on the same keys (each turn recompiles the shared table).
func TestBoundMatchesTake(t *testing.T) {
	for _, p := range policies() {
		t.Run("alg="+string(p.Algorithm), func(t *testing.T) {
			// One shard each: a recompiled bucket policy re-expresses a
			// table's fractions when the table is next touched, rounding
			// up, so with several shards (spread by each store's own hash
			// seed) a key's rounding would depend on which of its shard's
			// neighbours were asked between two recompilations.
			clock := sluicetest.NewClock(t0)
			bs := New(WithClock(clock), WithSweepInterval(0), withShards(1))
			defer bs.Close()
			ts := New(WithClock(clock), WithSweepInterval(0), withShards(1))
			defer ts.Close()
			p.Name = "named"
			q := p
			q.Limit = p.Limit + 3
			var ls []*sluice.Limiter
			for _, pol := range []sluice.Policy{p, q} {
				l, err := sluice.NewLimiter(bs, pol)
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, l)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			ctx := context.Background()
			now := int64(0)
			admitted := 0
			for step := range 20000 {
				now += rng.Int64N(int64(p.Period) / 20)
				clock.Set(time.Unix(0, now))
				i := 0
				if step >= 10000 { // first one policy, then both in turn
					i = rng.IntN(2)
				}
				key := fmt.Sprint("key-", rng.IntN(50))
				cost := rng.Int64N(3)
				got, err := ls[i].AllowN(ctx, key, cost)
				if err != nil {
					t.Fatal(err)
				}
				want, err := ts.Take(ctx, ls[i].Policy(), key, cost)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("step %d: policy %v key %s cost %d: got %+v, want %+v", step, ls[i].Policy(), key, cost, got, want)
				}
				if got.Allowed && cost > 0 {
					admitted++
				}
			}
			if admitted == 0 || bs.Len() != ts.Len() {
				t.Errorf("%d admitted; %d keys held, want %d", admitted, bs.Len(), ts.Len())
			}
		})
	}
}

// TestBoundErrors: a bound policy fails as Store.Take does.
func TestBoundErrors(t *testing.T) {
	s := New(WithSweepInterval(0))
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	b, err := s.Bind(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Take(context.Background(), "k", -1); err == nil {
		t.Error("cost -1: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Take(ctx, "k", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v, want context.Canceled", err)
	}
	if d, err := b.Take(context.Background(), "k", 1); err != nil || !d.Allowed || d.Remaining != 9 {
		t.Errorf("first take: %+v %v", d, err)
	}
	s.Close()
	if _, err := b.Take(context.Background(), "k", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Bind(sluice.Policy{Algorithm: sluice.GCRA, Limit: 0, Period: time.Second}); err == nil {
		t.Error("Bind of an invalid policy: no error")
	}
}

// TestLimiterAllocs: Limiter.Allow over memstore on a key it holds
// allocates nothing.
func TestLimiterAllocs(t *testing.T) {
	for _, p := range policies() {
		t.Run("alg="+string(p.Algorithm), func(t *testing.T) {
			clock := sluicetest.NewClock(t0)
			s := New(WithClock(clock), WithSweepInterval(0))
			defer s.Close()
			p.Limit, p.Period = 1<<40, 100*time.Millisecond
			if p.Algorithm.IsBucket() {
				p.Burst = 1 << 40
			}
			l, err := sluice.NewLimiter(s, p)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			step := 0
			allow := func() {
				step++
				clock.Set(t0.Add(time.Duration(step) * time.Millisecond))
				if d, err := l.Allow(ctx, "key"); err != nil || !d.Allowed {
					t.Fatal(d, err)
				}
			}
			// Until a sliding-log's log has reached its size in the steady
			// state (100 entries, one per millisecond of the window).
			for range 1000 {
				allow()
			}
			if n := mallocs(6000, allow); n != 0 {
				t.Errorf("Allow on an existing key: %d allocations in 6000 calls, want 0", n)
			}
		})
	}
}

// countingStore embeds *Store and overrides Take, as a user's wrapper
// that counts or logs decisions would.
type countingStore struct {
	*Store
	takes int
}

func (c *countingStore) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	c.takes++
	return c.Store.Take(ctx, p, key, cost)
}

// TestEmbeddedStoreNotBypassed: a limiter over a type that embeds *Store
// and overrides Take calls that Take; the promoted Bind would skip it.
func TestEmbeddedStoreNotBypassed(t *testing.T) {
	s := New(WithSweepInterval(0))
	defer s.Close()
	w := &countingStore{Store: s}
	l, err := sluice.NewLimiter(w, sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Allow(context.Background(), "k"); err != nil {
			t.Fatal(err)
		}
	}
	if w.takes != 3 {
		t.Errorf("the wrapper's Take ran %d times for 3 decisions, want 3", w.takes)
	}
}
