// SPDX-License-Identifier: Apache-2.0

package grpclimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// BenchmarkInterceptor measures a unary call through the interceptor
// (called directly, without a transport) against the bare handler, with one
// per-API-key limit on a memstore, always admitted, over 1024 keys.
func BenchmarkInterceptor(b *testing.B) {
	store := memstore.New()
	defer store.Close()
	l, err := sluice.NewLimiter(store, sluice.Policy{Name: "per-key", Algorithm: sluice.GCRA, Limit: 1 << 40, Period: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	i, err := New(Method(check, 1, Limit{Limiter: l, Key: Metadata("x-api-key")}))
	if err != nil {
		b.Fatal(err)
	}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	info := &grpc.UnaryServerInfo{FullMethod: check}
	limited := i.Unary()
	for _, c := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"bare", func(ctx context.Context) error { _, err := handler(ctx, nil); return err }},
		{"limited", func(ctx context.Context) error { _, err := limited(ctx, nil, info, handler); return err }},
	} {
		b.Run("handler="+c.name, func(b *testing.B) {
			var next atomic.Uint32
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				n := next.Add(1)
				ctxs := make([]context.Context, 1024)
				for k := range ctxs {
					ctxs[k] = metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", fmt.Sprintf("key-%d-%d", n, k)))
				}
				k := 0
				for pb.Next() {
					if err := c.call(ctxs[k&1023]); err != nil {
						b.Fatal(err)
					}
					k++
				}
			})
		})
	}
}
