// SPDX-License-Identifier: Apache-2.0

package telemetry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// otelVars are the variables Enabled reads; each case starts with all unset.
var otelVars = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"}

func setEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, k := range otelVars {
		t.Setenv(k, "")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want bool
	}{
		{nil, false}, // the default: off
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}, true},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/v1/traces"}, true},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp"}, true},
		{[]string{"OTEL_TRACES_EXPORTER", "none", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}, false},
		{[]string{"OTEL_SDK_DISABLED", "true", "OTEL_TRACES_EXPORTER", "otlp"}, false},
		{[]string{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, false}, // a protocol alone sends nothing
	} {
		setEnv(t, c.env...)
		if got := telemetry.Enabled(); got != c.want {
			t.Errorf("%v: Enabled() = %v, want %v", c.env, got, c.want)
		}
		tr, err := telemetry.FromEnv(context.Background())
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if (tr != nil) != c.want {
			t.Errorf("%v: FromEnv() = %v, want tracing %v", c.env, tr, c.want)
		}
		tr.Shutdown(context.Background())
	}
}

func TestFromEnvErrors(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"OTEL_TRACES_EXPORTER", "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin"`},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon"}, `OTEL_EXPORTER_OTLP_PROTOCOL="carrier-pigeon"`},
	} {
		setEnv(t, c.env...)
		if _, err := telemetry.FromEnv(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %s", c.env, err, c.want)
		}
	}
}

// Tracing off adds nothing: the store and handler are returned as given.
func TestOffIsIdentity(t *testing.T) {
	var tr *telemetry.Tracing
	store := memstore.New()
	defer store.Close()
	if tr.Store(store) != sluice.Store(store) {
		t.Error("a nil Tracing wrapped the store")
	}
	h := http.NotFoundHandler()
	if got := tr.HTTPHandler(h, "x"); got == nil {
		t.Error("a nil Tracing returned no handler")
	}
}

func TestStoreSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := telemetry.New(tp)
	defer tr.Shutdown(context.Background())
	mem := memstore.New()
	defer mem.Close()
	store := tr.Store(mem)
	// One wrapper type forwards every capability (on 1b40f8a it needed
	// four types and dropped Binder, the Limiter's fast path).
	if _, ok := store.(sluice.Binder); !ok {
		t.Fatal("the traced memstore lost its Binder (the Limiter's fast path)")
	}
	if _, ok := store.(lease.Giver); !ok {
		t.Fatal("the traced memstore lost its Give (leases)")
	}
	if _, ok := store.(inflight.Semaphore); !ok {
		t.Fatal("the traced memstore lost its Semaphore (in-flight limits)")
	}
	if _, ok := store.(sluice.Refunder); !ok {
		t.Fatal("the traced memstore lost its Refund (reservations)")
	}
	p := sluice.Policy{Name: "api", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute}
	ctx := context.Background()
	store.Take(ctx, p, "user-1", 1)
	store.Take(ctx, p, "user-1", 1)
	out := make([]sluice.Decision, 1)
	store.TakeAll(ctx, []sluice.Request{{Policy: p, Key: "user-2", Cost: 1}}, out)
	store.Reset(ctx, p, "user-1")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := store.Take(cancelled, p, "user-3", 1)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Take with a cancelled context: %v", err)
	}

	type want struct {
		name    string
		allowed string // "" when the span must not have it
		failed  bool
	}
	wants := []want{
		{"sluice.store.Take", "true", false},
		{"sluice.store.Take", "false", false},
		{"sluice.store.TakeAll", "true", false},
		{"sluice.store.Reset", "", false},
		{"sluice.store.Take", "", true},
	}
	spans := rec.Ended()
	if len(spans) != len(wants) {
		t.Fatalf("%d spans, want %d", len(spans), len(wants))
	}
	for i, s := range spans {
		w := wants[i]
		attrs := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value
			if strings.Contains(a.Value.String(), "user-") {
				t.Errorf("span %d: attribute %s carries the key", i, a.Key)
			}
		}
		got := ""
		if v, ok := attrs["sluice.allowed"]; ok {
			got = v.String()
		}
		if s.Name() != w.name || got != w.allowed || (s.Status().Code.String() == "Error") != w.failed {
			t.Errorf("span %d: %s allowed=%q status=%v, want %s allowed=%q failed=%v", i, s.Name(), got, s.Status(), w.name, w.allowed, w.failed)
		}
		if s.Name() == "sluice.store.Take" && (attrs["sluice.policy"].String() != "api" || attrs["sluice.algorithm"].String() != "fixed-window" || attrs["sluice.cost"].AsInt64() != 1) {
			t.Errorf("span %d: attributes %v", i, s.Attributes())
		}
	}
}

func TestHTTPSpanNamedByRoute(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := telemetry.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/check", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(tr.HTTPHandler(mux, "sluice"))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/check", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tr.Shutdown(context.Background())
	if s := rec.Ended(); len(s) != 1 || s[0].Name() != "POST /v1/check" {
		t.Errorf("spans %v, want one named POST /v1/check", s)
	}
}

// TestWrapper: the traced store is a wrapper as the sluice.Store doc asks
// (storetest.Wrapper): every capability, forwarded or neutral, over a store
// that has them all and over one that has none.
func TestWrapper(t *testing.T) {
	tr := telemetry.New(sdktrace.NewTracerProvider())
	defer tr.Shutdown(context.Background())
	for name, bare := range map[string]bool{"memstore": false, "bare": true} {
		t.Run(name, func(t *testing.T) {
			clk := sluicetest.NewClock(time.Unix(1_000_000, 0))
			var s sluice.Store = memstore.New(memstore.WithClock(clk))
			t.Cleanup(func() { s.Close() })
			if bare {
				s = struct{ sluice.Store }{s}
			}
			storetest.Wrapper(t, storetest.Harness{Store: s, Clock: clk}, tr.Store)
		})
	}
}
