// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// receiver is a real OTLP/gRPC trace receiver on a loopback port: it keeps
// every span exported to it.
type receiver struct {
	collectorpb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // resource attributes seen
}

func (r *receiver) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			r.attrs[a.GetKey()] = a.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func startReceiver(t *testing.T) (*receiver, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{attrs: map[string]string{}}
	g := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(g, r)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return r, lis.Addr().String()
}

// With the standard OTEL_* environment pointing at an OTLP receiver, serve
// traces RLS calls (continuing the caller's trace), HTTP API calls, and
// the store calls under each; the spans never carry the key.
func TestServeTraces(t *testing.T) {
	rec, addr := startReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	r := startServe(t, serveOptions{})
	if !strings.Contains(r.stderr.String(), "tracing on") {
		t.Errorf("the log does not say tracing is on:\n%s", r.stderr)
	}

	client, _ := rlsClient(t, r.grpcAddr)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if _, err := client.ShouldRateLimit(ctx, rlsRequest("rider-api", "rider_id", "secret-rider")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+r.httpAddr+"/v1/check", "application/json", strings.NewReader(`{"domain":"partner-api","descriptors":[{"entries":[{"key":"partner","value":"secret-partner"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r.stop(t) // flushes the spans

	rec.mu.Lock()
	defer rec.mu.Unlock()
	byName := map[string]*tracepb.Span{}
	var stores []*tracepb.Span
	for _, s := range rec.spans {
		byName[s.GetName()] = s
		if strings.HasPrefix(s.GetName(), "sluice.store.") {
			stores = append(stores, s)
		}
		for _, a := range s.GetAttributes() {
			if strings.Contains(a.GetValue().String(), "secret-") {
				t.Errorf("span %s: attribute %s carries a key: %v", s.GetName(), a.GetKey(), a.GetValue())
			}
		}
	}
	rlsSpan := byName["envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"]
	if rlsSpan == nil || rlsSpan.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("no RLS server span among %d spans: %v", len(rec.spans), names(rec.spans))
	}
	if got := hex.EncodeToString(rlsSpan.GetTraceId()); got != traceID {
		t.Errorf("RLS span trace %s, want the caller's %s (traceparent)", got, traceID)
	}
	httpSpan := byName["POST /v1/check"]
	if httpSpan == nil || httpSpan.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("no HTTP server span POST /v1/check among %v", names(rec.spans))
	}
	for _, parent := range []*tracepb.Span{rlsSpan, httpSpan} {
		found := false
		for _, s := range stores {
			found = found || (string(s.GetParentSpanId()) == string(parent.GetSpanId()) && string(s.GetTraceId()) == string(parent.GetTraceId()))
		}
		if !found {
			t.Errorf("no store span under %s (store spans: %v)", parent.GetName(), names(stores))
		}
	}
	if rec.attrs["service.name"] != "sluice" {
		t.Errorf("resource service.name %q, want sluice", rec.attrs["service.name"])
	}
}

func names(spans []*tracepb.Span) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.GetName())
	}
	return n
}
