// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestOutside13RLQSBucketBytes: an RLQS stream may report DefaultMaxBuckets
// (1000) buckets, and each bucket id is kept verbatim, in several copies
// (the BucketId, its bucketKey, the division's key), whatever its size; and
// GET /v1/rules (no token, polled by the live page every second or two)
// sorts the divisions by rebuilding each bucket's whole bucketKey in every
// comparison, so its cost grows as n·log n × the bucket's bytes, although
// it shows each value cut to NearLimitValueBytes. The server keeps RLS
// descriptor values past 64 bytes as a digest (README, "Memory": "no value,
// however long, makes a key cost more than a key of 64 bytes") and the live
// view's memory "whatever the traffic" bounded (live.go); RLQS buckets, fed
// by Envoy from request headers, have neither. Here one stream reports 200
// buckets of 64 KiB (what Envoy's default header limit lets through).
func TestOutside13RLQSBucketBytes(t *testing.T) {
	h := start(t, map[string]string{"edge.yaml": "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: second, requests_per_unit: 100}\n"})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	h.srv.RegisterGRPC(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const buckets, size = 200, 64 << 10
	runtime.GC() // twice: what earlier tests left in pools goes too
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{}) // a fix may end the stream (RESOURCE_EXHAUSTED)
	go func() {
		defer close(ended)
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	}()
	{
		pad := strings.Repeat("x", size-8)
		for i := 0; i < buckets; i += 40 {
			var us []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage
			for j := i; j < i+40; j++ {
				us = append(us, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
					BucketId: &rlqspb.BucketId{Bucket: map[string]string{"tenant": fmt.Sprintf("%08d", j) + pad}}, NumRequestsAllowed: 1})
			}
			if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: us}); err != nil {
				break // the server ended the stream
			}
		}
	}
	// Wait (for a condition, not a duration) until the replica divides
	// them all, or ends the stream.
	for deadline := time.Now().Add(30 * time.Second); len(h.srv.rlqs.Divisions()) < buckets; {
		select {
		case <-ended:
			t.Logf("the stream was ended after %d divisions", len(h.srv.rlqs.Divisions()))
		default:
			if time.Now().After(deadline) {
				t.Fatalf("%d divisions after 30 s, want %d", len(h.srv.rlqs.Divisions()), buckets)
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		break
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	// Envoy needs its bucket id back in each assignment, so one copy of
	// what the stream reported may be held; more is copies.
	held, reported := int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(buckets*size)
	if held > reported+4<<20 {
		t.Errorf("one stream's %d buckets of %d KiB (%d MiB reported): the replica holds %d MiB for them (%d KiB a bucket); want at most one copy (+4 MiB)",
			buckets, size>>10, reported>>20, held>>20, held/buckets>>10)
	}

	runtime.ReadMemStats(&before)
	resp, err := http.Get(h.http.URL + "/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("GET /v1/rules with %d RLQS buckets of %d KiB: allocated %d MiB for an answer of %d KiB; want its cost bounded by what it shows (under 16 MiB)",
			buckets, size>>10, alloc>>20, n>>10)
	}
}
