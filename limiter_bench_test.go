// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/shard"
)

// BenchmarkLimiterAllow times Limiter.Allow over memstore on 100k keys at
// a limit every decision stays under (each is admitted and written), bare
// and through the store wrappers a policy can pass through unchanged.
func BenchmarkLimiterAllow(b *testing.B) {
	p := sluice.Policy{Name: "bench", Algorithm: sluice.GCRA, Limit: 1_000_000_000, Period: time.Second}
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name string
		wrap func(sluice.Store) sluice.Store
	}{
		{"mem", func(s sluice.Store) sluice.Store { return s }},
		{"mem+shard(1)", func(s sluice.Store) sluice.Store { return shard.New(s, 1) }},
		{"mem+lease(off)", func(s sluice.Store) sluice.Store {
			return lease.New(s, lease.WithPolicies(func(sluice.Policy) bool { return false }))
		}},
	} {
		b.Run("store="+tc.name, func(b *testing.B) {
			mem := memstore.New()
			defer mem.Close()
			l, err := sluice.NewLimiter(tc.wrap(mem), p)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := l.Allow(ctx, keys[i%len(keys)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
