// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/sluicetest"
)

// TestServeProcessesLeaseRedis: 3 sluice serve processes with default
// flags share one real Redis and a rule with lease: true at 1,000 per year;
// 64 concurrent gRPC clients make 20,000 requests, then each process is
// asked until all three refuse in one round (which spends what their blocks
// still hold): exactly 1,000 are OK over the whole run, with no store error.
func TestServeProcessesLeaseRedis(t *testing.T) {
	redis := sluicetest.StartRedis(t)
	dir := t.TempDir()
	cfg := "domain: fleet\ndescriptors:\n" +
		"  - key: fixed-window\n    rate_limit: {unit: year, requests_per_unit: 1000, lease: true}\n" +
		"  - key: gcra\n    rate_limit: {unit: year, requests_per_unit: 1000, algorithm: gcra, lease: true}\n"
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var clients []rls.RateLimitServiceClient
	var https []string
	for range 3 {
		addr, httpAddr, _, _ := startServeProcessOn(t, "", "--store", "redis://"+redis, "--config", dir)
		c, _ := rlsClient(t, addr)
		clients = append(clients, c)
		https = append(https, httpAddr)
	}
	storeErrs := func() int64 {
		var n int64
		for _, h := range https {
			n += storeErrors(t, h)
		}
		return n
	}
	for _, alg := range []string{"fixed-window", "gcra"} {
		// Per year (a fixed window of 365 days from the epoch, or a bucket
		// refilling one unit per 8.76 hours): a second-long run meets a
		// boundary or a refill with a probability of 10⁻⁴ at most.
		req := rlsRequest("fleet", alg, "acme")
		errs0 := storeErrs()
		const total = 20000
		var next, ok atomic.Int64
		var wg sync.WaitGroup
		for c := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := clients[c%len(clients)]
				for next.Add(1) <= total {
					resp, err := client.ShouldRateLimit(context.Background(), req)
					if err != nil {
						t.Error(err)
						return
					}
					if resp.OverallCode == rls.RateLimitResponse_OK {
						ok.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		during := ok.Load()
		if during > 1000 {
			t.Fatalf("%s: OK %d during the load, more than the limit 1000", alg, during)
		}
		for round := 0; ; round++ {
			refused := 0
			for _, c := range clients {
				resp, err := c.ShouldRateLimit(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.OverallCode == rls.RateLimitResponse_OK {
					ok.Add(1)
				} else {
					refused++
				}
			}
			if refused == len(clients) {
				break
			}
			if round > 2000 {
				t.Fatalf("still admitting after %d rounds: OK %d", round, ok.Load())
			}
		}
		switch errs := storeErrs() - errs0; {
		case ok.Load() > 1000:
			t.Errorf("%s: OK %d in all (%d during the load), more than the limit 1000", alg, ok.Load(), during)
		case errs > 0:
			// With default flags a Redis that answers is never a failure
			// (deadline-aware calls): a store error here is a bug.
			t.Errorf("%s: %d store errors on default flags; OK %d", alg, errs, ok.Load())
		case ok.Load() != 1000:
			t.Errorf("%s: OK %d in all (%d during the load) with no store error, want exactly 1000", alg, ok.Load(), during)
		}
		t.Logf("%s: OK %d during the load of %d requests, %d after it", alg, during, total, ok.Load()-during)
	}
}
