// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
