package redisstore

import (
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// BenchmarkTake measures decisions on Redis TIME over 100k keys, with
// callers concurrent goroutines sharing one client (auto-pipelined).
func BenchmarkTake(b *testing.B) {
	c := newClient(b, sluicetest.StartRedis(b))
	s := newStore(b, c, WithTimeout(10*time.Second))
	const keys = 100_000
	names := make([]string, keys)
	for i := range names {
		names[i] = "user-" + strconv.Itoa(i)
	}
	for _, alg := range sluice.Algorithms {
		p := sluice.Policy{Algorithm: alg, Limit: 100, Period: time.Second}
		for _, callers := range []int{1, 16, 64, 256} {
			b.Run(fmt.Sprintf("store=redis/alg=%s/callers=%d", alg, callers), func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				var seq atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					i := seq.Add(1) * 7919
					for pb.Next() {
						i++
						if _, err := s.Take(b.Context(), p, names[i%keys], 1); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}
