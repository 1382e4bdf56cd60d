// SPDX-License-Identifier: Apache-2.0

// Package telemetry is sluice serve's OpenTelemetry tracing: spans for RLS
// (gRPC) and HTTP API calls and for every store call, exported over OTLP.
//
// It is off unless the standard environment asks for it (Enabled), and
// when off it adds nothing: no tracer provider, no gRPC stats handler, no
// HTTP wrapper, no store wrapper. When on, it reads the standard variables
// of the OpenTelemetry specification: OTEL_TRACES_EXPORTER (otlp or none),
// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL (http/protobuf, the default, or
// grpc), OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER[_ARG]
// (the SDK's default: parentbased_always_on), and propagates W3C Trace
// Context and Baggage, so a trace started by Envoy continues into sluice.
//
// Store spans name the policy, algorithm, cost and outcome, never the key:
// keys are client identities (IP addresses, API keys) that do not belong in
// a tracing backend.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Enabled reports whether the environment asks for traces: OTEL_SDK_DISABLED
// is not "true", and OTEL_TRACES_EXPORTER names an exporter other than
// "none", or an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with OTEL_TRACES_EXPORTER unset.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" {
		return e != "none"
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Tracing is the tracing of one sluice serve. A nil *Tracing is tracing
// turned off: its methods return what they are given.
type Tracing struct {
	tp    *sdktrace.TracerProvider
	prop  propagation.TextMapPropagator
	store trace.Tracer
}

// FromEnv returns the tracing the environment asks for, or nil when it asks
// for none (see Enabled). An exporter or protocol it does not support is an
// error naming the variable and the value.
func FromEnv(ctx context.Context) (*Tracing, error) {
	if !Enabled() {
		return nil, nil
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: sluice exports traces with otlp (or none)", e)
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want http/protobuf or grpc", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// service.name is sluice unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise (later options win).
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "sluice")),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return New(sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))), nil
}

// New returns tracing through tp (which Shutdown shuts down), with W3C
// Trace Context and Baggage propagation. Tests give it a provider over an
// in-memory exporter.
func New(tp *sdktrace.TracerProvider) *Tracing {
	return &Tracing{
		tp:    tp,
		prop:  propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		store: tp.Tracer("github.com/sluicehq/sluice/internal/telemetry"),
	}
}

// Shutdown flushes the spans not yet exported and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// GRPCServerOption returns the option that traces every gRPC call of a
// server (an empty option when t is nil).
func (t *Tracing) GRPCServerOption() grpc.ServerOption {
	if t == nil {
		return grpc.EmptyServerOption{}
	}
	return grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.tp), otelgrpc.WithPropagators(t.prop)))
}

// HTTPHandler returns h traced: one server span per request, named by
// operation and the matched route (h itself when t is nil).
func (t *Tracing) HTTPHandler(h http.Handler, operation string) http.Handler {
	if t == nil {
		return h
	}
	return otelhttp.NewHandler(h, operation,
		otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.prop),
		otelhttp.WithSpanNameFormatter(func(op string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return op + " " + r.Method
		}))
}
