// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"strconv"
	"strings"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/memstore"
)

// BenchmarkShouldRateLimit is the service's own cost per RLS request, without
// gRPC: match, decide on memstore, build the response. One descriptor over
// 100,000 distinct values.
func BenchmarkShouldRateLimit(b *testing.B) {
	store := memstore.New()
	defer store.Close()
	srv, err := New(store)
	if err != nil {
		b.Fatal(err)
	}
	c, err := config.Load(mapFS("load.yaml", "domain: load\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 100}\n"))
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Apply(c); err != nil {
		b.Fatal(err)
	}
	const values = 100000
	reqs := make([]*rls.RateLimitRequest, values)
	for i := range reqs {
		reqs[i] = &rls.RateLimitRequest{Domain: "load", Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "u" + strconv.Itoa(i)}},
		}}}
	}
	r := rlsServer{s: srv}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := r.ShouldRateLimit(context.Background(), reqs[i%values]); err != nil {
				b.Error(err)
				return
			}
			i += 7919
		}
	})
}

// BenchmarkStoreKey is the cost of a descriptor's store key: verbatim for
// a short one, the digest form past maxStoreKey bytes.
func BenchmarkStoreKey(b *testing.B) {
	for _, n := range []int{8, 100, 60 << 10} {
		entries := []config.Entry{{Key: "user", Value: strings.Repeat("v", n)}}
		b.Run("value="+strconv.Itoa(n)+"B", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				storeKey(nil, entries)
			}
		})
	}
}
