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
// still hold): exactly 1,000 are OK over the whole run, never more.
func TestServeProcessesLeaseRedis(t *testing.T) {
	redis := sluicetest.StartRedis(t)
	dir := t.TempDir()
	cfg := "domain: fleet\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: year, requests_per_unit: 1000, lease: true, failure_mode: closed}\n"
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var clients []rls.RateLimitServiceClient
	for range 3 {
		addr, _, _ := startServeProcess(t, "--store", "redis://"+redis, "--config", dir)
		c, _ := rlsClient(t, addr)
		clients = append(clients, c)
	}
	// A fixed window of a year (365 days from the epoch): a second-long run
	// meets its boundary with probability 3·10⁻⁸.
	req := rlsRequest("fleet", "tenant", "acme")
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
		t.Fatalf("OK %d during the load, more than the limit 1000", during)
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
	if ok.Load() != 1000 {
		t.Errorf("OK %d in all (%d during the load), want exactly 1000", ok.Load(), during)
	}
	t.Logf("OK %d during the load of %d requests, %d after it", during, total, ok.Load()-during)
}
