// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
)

// tick is a clock that moves 1 µs at every reading, so that a benchmark's
// blocks grow the same way however fast the machine runs.
type tick struct{ ns atomic.Int64 }

func (c *tick) Now() time.Time { return time.Unix(0, c.ns.Add(1000)) }

// BenchmarkLocal times the lease's hot path: Limiter.Allow admitted from
// a live block, with no store round trip but the few that take blocks (a
// fixed-window limit no request reaches, so blocks grow and last their
// window). keys=1 is one caller on one key; keys=parallel is b.RunParallel
// with a key per goroutine. store-calls/op is the round trips that took
// blocks, per decision.
func BenchmarkLocal(b *testing.B) {
	p := sluice.Policy{Name: "bench", Algorithm: sluice.FixedWindow, Limit: 1 << 50, Period: time.Hour}
	run := func(b *testing.B, parallel bool) {
		clk := new(tick)
		mem := memstore.New(memstore.WithClock(clk))
		ls := lease.New(mem, lease.WithClock(clk))
		defer ls.Close()
		l, err := sluice.NewLimiter(ls, p)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		if parallel {
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				key := "k" + strconv.FormatInt(next.Add(1), 10)
				for pb.Next() {
					if d, err := l.Allow(ctx, key); err != nil || !d.Allowed {
						b.Errorf("Allow: %+v %v", d, err)
						return
					}
				}
			})
		} else {
			for b.Loop() {
				if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
					b.Fatalf("Allow: %+v %v", d, err)
				}
			}
		}
		b.ReportMetric(float64(ls.Stats(p).StoreCalls)/float64(b.N), "store-calls/op")
	}
	b.Run("keys=1", func(b *testing.B) { run(b, false) })
	b.Run("keys=parallel", func(b *testing.B) { run(b, true) })
}
