// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// BenchmarkAcquire: one in-flight slot taken and given back (Acquire then
// Release: two store calls, two scripts on Redis) per op, on memstore and
// on a real Redis with the default store, 16 keys, parallel callers.
func BenchmarkAcquire(b *testing.B) {
	mem := memstore.New()
	b.Cleanup(func() { mem.Close() })
	rs, err := New(newClient(b, sluicetest.StartRedis(b)))
	if err != nil {
		b.Fatal(err)
	}
	for _, st := range []struct {
		name string
		s    inflight.Semaphore
	}{{"mem", mem}, {"redis", rs}} {
		b.Run("store="+st.name, func(b *testing.B) {
			f, err := inflight.New(st.s, "bench", 1<<30)
			if err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := "k" + strconv.FormatInt(seq.Add(1)%16, 10)
				for pb.Next() {
					h, _, err := f.Acquire(ctx, key, false)
					if err != nil || h == nil {
						b.Errorf("acquire: %v %v", h, err)
						return
					}
					if err := h.Release(ctx, false); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
