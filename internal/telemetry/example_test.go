// SPDX-License-Identifier: Apache-2.0

package telemetry_test

import (
	"context"
	"fmt"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/memstore"
)

// Trace every store call: one span per call, with the policy and the
// outcome.
func ExampleTracing_Store() {
	rec := tracetest.NewSpanRecorder()
	tr := telemetry.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	defer tr.Shutdown(context.Background())
	mem := memstore.New()
	defer mem.Close()
	lim, _ := sluice.NewLimiter(tr.Store(mem), sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 1, Period: time.Minute})
	lim.Allow(context.Background(), "client")
	lim.Allow(context.Background(), "client")
	for _, s := range rec.Ended() {
		fmt.Print(s.Name())
		for _, a := range s.Attributes() {
			fmt.Printf(" %s=%s", a.Key, a.Value.String())
		}
		fmt.Println()
	}
	// Output:
	// sluice.store.Take sluice.policy=api sluice.algorithm=gcra sluice.cost=1 sluice.allowed=true
	// sluice.store.Take sluice.policy=api sluice.algorithm=gcra sluice.cost=1 sluice.allowed=false
}
