// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/telemetry"
)

// tracingFlushTimeout bounds how long serve waits, when it stops, for the
// last spans to be exported.
const tracingFlushTimeout = 5 * time.Second

// startTracing turns tracing on when the OTEL_* environment asks for it
// (internal/telemetry), and returns nil, tracing off, otherwise.
func startTracing(ctx context.Context, log *slog.Logger) (*telemetry.Tracing, error) {
	t, err := telemetry.FromEnv(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if t != nil {
		endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
		if endpoint == "" {
			endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
		log.Info("tracing on: OTLP", "endpoint", endpoint)
	}
	return t, nil
}

// stopTracing exports the spans not yet sent.
func stopTracing(t *telemetry.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("tracing: the last spans were not exported", "error", err)
	}
}
