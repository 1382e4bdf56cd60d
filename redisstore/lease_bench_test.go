// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
)

// BenchmarkHotKeyLimiter is the library's side of the leases figure: three
// Limiters (three replicas, each with its own store connection, in this one
// process) decide one hot key limited to 1,000 per second (gcra) on one
// real Redis, 64 goroutines at once, with and without WithLease. Reported:
// decisions/s and store round trips per decision (the Limiters' own count,
// LeaseStats.StoreCalls; without leases every decision is one).
//
//	go test -run '^$' -bench BenchmarkHotKeyLimiter -benchtime 200000x ./redisstore
func BenchmarkHotKeyLimiter(b *testing.B) {
	addr := sluicetest.StartRedis(b)
	for _, alg := range []sluice.Algorithm{sluice.GCRA, sluice.FixedWindow} {
		for _, leased := range []bool{false, true} {
			b.Run(fmt.Sprintf("alg=%s/lease=%v", alg, leased), func(b *testing.B) {
				p := sluice.Policy{Name: fmt.Sprintf("hot-%s-%v", alg, leased), Algorithm: alg, Limit: 1000, Period: time.Second}
				var lims []*sluice.Limiter
				var leases []*lease.Store
				for range 3 {
					s, err := Open("redis://" + addr)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = s.Close() })
					var store sluice.Store = s
					if leased {
						ls := lease.New(s)
						leases = append(leases, ls)
						store = ls
					}
					l, err := sluice.NewLimiter(store, p)
					if err != nil {
						b.Fatal(err)
					}
					lims = append(lims, l)
				}
				var w atomic.Int64
				b.SetParallelism(32) // 64 goroutines on 2 CPUs
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					l := lims[w.Add(1)%3]
					for pb.Next() {
						if _, err := l.Allow(context.Background(), "hot"); err != nil {
							b.Error(err)
							return
						}
					}
				})
				elapsed := time.Since(start)
				b.StopTimer()
				calls := uint64(b.N)
				if leased {
					calls = 0
					for _, ls := range leases {
						calls += ls.Stats(p).StoreCalls
					}
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
				b.ReportMetric(float64(calls)/float64(b.N), "roundtrips/decision")
			})
		}
	}
}

// BenchmarkHotKeyShards is the sharding figure: one hot key on a real
// 3-master Redis Cluster, decided by one Limiter over Open's cluster
// client, 64 goroutines at once, with the key whole (shards=1) and split
// over 3 shards on 3 masters. The limit (10⁹ per second, gcra) admits
// every request, so every decision is one round trip to one master.
//
//	go test -run '^$' -bench BenchmarkHotKeyShards -benchtime 100000x ./redisstore
func BenchmarkHotKeyShards(b *testing.B) {
	nodes := sluicetest.StartRedisCluster(b, 3)
	url := "redis+cluster://" + nodes[0]
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			s, err := Open(url)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			p := sluice.Policy{Name: fmt.Sprintf("hot-%d", n), Algorithm: sluice.GCRA, Limit: 1_000_000_000, Period: time.Second}
			l, err := sluice.NewLimiter(shard.New(s, n), p)
			if err != nil {
				b.Fatal(err)
			}
			var refused atomic.Int64
			b.SetParallelism(32)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					d, err := l.Allow(context.Background(), "hot")
					if err != nil {
						b.Error(err)
						return
					}
					if !d.Allowed {
						refused.Add(1)
					}
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			if refused.Load() > 0 {
				b.Errorf("%d refusals: the figure is meant to be of one round trip per decision", refused.Load())
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
		})
	}
}
