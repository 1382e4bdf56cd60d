// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/rlqs"
	"github.com/sluicehq/sluice/memstore"
)

// TestRLQSRegistered: RegisterGRPC serves RLQS beside RLS, from the
// configuration in force, and /metrics carries its per-rule metrics,
// labelled by domain and the rule's one name (config.Rule.Title).
func TestRLQSRegistered(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"edge.yaml": `
domain: edge
descriptors:
  - key: route
    value: api
    rate_limit: {unit: second, requests_per_unit: 100, name: api}
`})
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	srv, err := New(store, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ReloadDir(dir); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.RegisterGRPC(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		{BucketId: &rlqspb.BucketId{Bucket: map[string]string{"route": "api"}}, NumRequestsAllowed: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	tb := resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if tb.GetTokensPerFill().GetValue() != 100 || tb.GetFillInterval().AsDuration().Seconds() != 1 {
		t.Fatalf("the only stream's assignment is %v, want the whole limit: 100 tokens per second", tb)
	}
	h := httptest.NewServer(srv.Handler())
	defer h.Close()
	// GET /v1/rules shows the rule's division: one bucket, this stream
	// assigned the whole limit.
	r0, err := h.Client().Get(h.URL + "/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	var rules RulesResponse
	if err := json.NewDecoder(r0.Body).Decode(&rules); err != nil {
		t.Fatal(err)
	}
	r0.Body.Close()
	if len(rules.Rules) != 1 || len(rules.Rules[0].RLQS) != 1 {
		t.Fatalf("GET /v1/rules: %+v, want one rule with one RLQS division", rules.Rules)
	}
	if d := rules.Rules[0].RLQS[0]; d.Bucket != "route=api" || d.Budget != 100 || d.FillSeconds != 1 || d.FleetGrant != 100 || d.Replicas != 1 ||
		len(d.Streams) != 1 || d.Streams[0].Grant != 100 || d.Streams[0].Stream == "" {
		t.Errorf("the division in GET /v1/rules: %+v, want bucket route=api, 100 per 1 s, one stream granted 100", d)
	}
	r, err := h.Client().Get(h.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	for _, want := range []string{
		`sluice_rlqs_streams{domain="edge",rule="api"} 1`,
		`sluice_rlqs_assigned_requests_per_second{domain="edge",rule="api"} 100`,
		`sluice_rlqs_reported_requests_total{domain="edge",result="allowed",rule="api"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestRLQSBucketBytesBounded: what one RLQS stream makes a replica hold,
// and what GET /v1/rules costs, are bounded whatever the stream's bucket
// ids (Envoy fills them from request headers). A bucket id of more than
// rlqs.MaxBucketIDBytes ends its stream with INVALID_ARGUMENT naming the
// field and its size, and leaves nothing behind; a stream of
// rlqs.DefaultMaxBuckets buckets with ids of the largest size allowed makes
// the replica hold one copy of each (the BucketId sent back to Envoy;
// everything else names a bucket by a key of at most 64 bytes), and GET
// /v1/rules lists RLQSDivisionsPerRule of them, sorted by those keys, for
// a cost bounded by what it shows. (An outside review found each id kept
// in three copies whatever its size, and /v1/rules rebuilding every
// bucket's whole key in each comparison of its sort: 200 buckets of
// 64 KiB held 41 MiB and cost each GET 440 MiB.)
func TestRLQSBucketBytesBounded(t *testing.T) {
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
	client := rlqspb.NewRateLimitQuotaServiceClient(conn)
	// tenant is a bucket id of size bytes, keys and values, told apart by i.
	tenant := func(i, size int) *rlqspb.BucketId {
		return &rlqspb.BucketId{Bucket: map[string]string{"tenant": fmt.Sprintf("%08d", i) + strings.Repeat("x", size-len("tenant")-8)}}
	}

	// Past the bound: refused, nothing kept.
	big, err := client.StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		{BucketId: tenant(0, 64<<10), NumRequestsAllowed: 1}}}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("bucket_quota_usages[0].bucket_id: %d bytes of keys and values, more than the %d", 64<<10, rlqs.MaxBucketIDBytes)
	if _, err := big.Recv(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) {
		t.Errorf("a bucket id of 64 KiB: %v, want INVALID_ARGUMENT with %q", err, want)
	}
	if n := len(h.srv.rlqs.Divisions(0)); n != 0 {
		t.Errorf("%d divisions after the refused report, want 0", n)
	}

	// At the bound: one copy of each id is held. held is what a stream
	// of buckets with ids of size bytes makes the replica hold, once they
	// are all divided (once each has had its first assignment); the cost
	// of a bucket that does not grow with its id is taken out by a
	// stream of small ids.
	const buckets, size = rlqs.DefaultMaxBuckets, rlqs.MaxBucketIDBytes
	held := func(from, size int) int64 {
		t.Helper()
		runtime.GC() // twice: what is left in pools goes too
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		st, err := client.StreamRateLimitQuotas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < from+buckets; i += 100 {
			var us []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage
			for j := i; j < i+100; j++ {
				us = append(us, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: tenant(j, size), NumRequestsAllowed: 1})
			}
			if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: us}); err != nil {
				t.Fatal(err)
			}
		}
		assigned := map[string]bool{}
		for len(assigned) < buckets {
			resp, err := st.Recv()
			if err != nil {
				t.Fatalf("after %d first assignments: %v", len(assigned), err)
			}
			for _, a := range resp.GetBucketAction() {
				assigned[strings.Clone(a.GetBucketId().GetBucket()["tenant"][:8])] = true
			}
		}
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		return int64(after.HeapAlloc) - int64(before.HeapAlloc)
	}
	small := held(0, 16)
	large := held(buckets, size)
	t.Logf("held for %d buckets: %d KiB with ids of 16 bytes, %d KiB with ids of %d bytes", buckets, small>>10, large>>10, size)
	if perBucket := (large - small) / buckets; perBucket > size+512 {
		t.Errorf("one stream's %d buckets with ids of %d bytes: the replica holds %d KiB for them, %d bytes a bucket more than for ids of 16 bytes; want one copy of the id (at most %d)",
			buckets, size, large>>10, perBucket, size+512)
	}
	if n := len(h.srv.rlqs.Divisions(0)); n != 2*buckets {
		t.Errorf("%d divisions, want %d", n, 2*buckets)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := http.Get(h.http.URL + "/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	var rules RulesResponse
	err = json.NewDecoder(resp.Body).Decode(&rules)
	resp.Body.Close()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GET /v1/rules allocated %d KiB", (after.TotalAlloc-before.TotalAlloc)>>10)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("GET /v1/rules with %d RLQS buckets of %d bytes: allocated %d MiB; want under 4 MiB", buckets, size, alloc>>20)
	}
	if len(rules.Rules) != 1 || len(rules.Rules[0].RLQS) != RLQSDivisionsPerRule {
		t.Fatalf("GET /v1/rules: %d rules, want one listing %d RLQS divisions", len(rules.Rules), RLQSDivisionsPerRule)
	}
	listed := map[string]bool{}
	for i, d := range rules.Rules[0].RLQS {
		if listed[d.Bucket] {
			t.Errorf("division %d (%.40s…) listed twice", i, d.Bucket)
		}
		listed[d.Bucket] = true
		if !strings.HasSuffix(d.Bucket, fmt.Sprintf("…(cut from %d bytes)", size-len("tenant"))) {
			t.Errorf("division %d's bucket %.40s…: want its value cut", i, d.Bucket)
		}
	}
}
