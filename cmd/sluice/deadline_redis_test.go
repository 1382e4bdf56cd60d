// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/sluicetest"
)

// TestServeCallerDeadline: the gRPC deadline Envoy sends bounds serve's
// Redis call. With Redis paused, a call with a 1s deadline is answered
// in time (by the rule's failure mode, local: OK from this replica's
// share), and such calls are no Redis failure: they do not open the
// breaker, so the first call without a deadline once the pause ends is
// decided by Redis.
func TestServeCallerDeadline(t *testing.T) {
	redis := sluicetest.StartRedis(t)
	dir := t.TempDir()
	cfg := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100}\n"
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startServe(t, serveOptions{storeURL: "redis://" + redis, configDir: dir})
	client, _ := rlsClient(t, r.grpcAddr)
	ask := func(timeout time.Duration) *rls.RateLimitResponse {
		t.Helper()
		ctx := context.Background()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		resp, err := client.ShouldRateLimit(ctx, rlsRequest("d", "k", "v"))
		if err != nil {
			t.Fatalf("ShouldRateLimit with a %v deadline: %v", timeout, err)
		}
		return resp
	}
	if got := ask(0); got.OverallCode != rls.RateLimitResponse_OK || got.Statuses[0].LimitRemaining != 99 {
		t.Fatalf("before the pause: %v", got)
	}
	host, port, _ := strings.Cut(redis, ":")
	if out, err := exec.Command("redis-cli", "-h", host, "-p", port, "CLIENT", "PAUSE", "1500", "ALL").CombinedOutput(); err != nil {
		t.Fatalf("redis-cli CLIENT PAUSE: %v: %s", err, out)
	}
	// 6 calls at once, more than the breaker's 5 failures in a row, each
	// with a 1s deadline: serve gives up on Redis 2ms + 100ms (a tenth of
	// the time left) before it and answers from the local share.
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			resp, err := client.ShouldRateLimit(ctx, rlsRequest("d", "k", "v"))
			if err != nil || resp.OverallCode != rls.RateLimitResponse_OK {
				t.Errorf("call %d during the pause: %v %v, want OK from the local share", i, resp, err)
			}
		}()
	}
	wg.Wait()
	errs := metricSum(t, r.httpAddr, "sluice_store_errors_total")
	if errs != 6 {
		t.Fatalf("sluice_store_errors_total %v after 6 calls answered by the failure mode, want 6", errs)
	}
	// No deadline: this call waits out the pause, and Redis decides it (the
	// breaker stayed closed; an open one would answer at once, without
	// Redis, and count a store error).
	// Remaining: 98, or down to 92 if Redis ran the 6 abandoned scripts
	// once the pause ended (an abandoned call may still consume: failures
	// err on the side of limiting).
	if got := ask(0); got.OverallCode != rls.RateLimitResponse_OK || got.Statuses[0].LimitRemaining > 98 || got.Statuses[0].LimitRemaining < 92 {
		t.Fatalf("after the pause: %v, want OK from Redis with 92 to 98 remaining", got)
	}
	if n := metricSum(t, r.httpAddr, "sluice_store_errors_total"); n != errs {
		t.Fatalf("sluice_store_errors_total %v after a call without a deadline, want still %v", n, errs)
	}
}

// TestServeHeartbeatsAreNotCallerTimeouts: serve runs on Redis with default
// flags and no traffic at all; Redis stalls for 2.5 s (CLIENT PAUSE: a long
// fork, a slow command). sluice_redis_caller_timeouts_total is "the
// caller's deadline ran out" (README, Failure modes), what tells whether
// Envoy's rate limit timeout is too tight for this Redis: with no request,
// it stays put. The replica heartbeats that ran out of their own deadline
// (1 s) during the stall are counted apart, in
// sluice_redis_heartbeat_timeouts_total.
func TestServeHeartbeatsAreNotCallerTimeouts(t *testing.T) {
	redis := sluicetest.StartRedisServer(t)
	r := startServe(t, serveOptions{storeURL: "redis://" + redis.Addr})
	before := metricSum(t, r.httpAddr, "sluice_redis_caller_timeouts_total")
	beats := metricSum(t, r.httpAddr, "sluice_redis_heartbeat_timeouts_total")
	host, port, _ := net.SplitHostPort(redis.Addr)
	if out, err := exec.Command("redis-cli", "-h", host, "-p", port, "CLIENT", "PAUSE", "2500", "ALL").CombinedOutput(); err != nil {
		t.Fatalf("redis-cli CLIENT PAUSE: %v: %s", err, out)
	}
	time.Sleep(3500 * time.Millisecond) // the stall, and a heartbeat after it
	decisions := metricSum(t, r.httpAddr, "sluice_decisions_total")
	after := metricSum(t, r.httpAddr, "sluice_redis_caller_timeouts_total")
	if decisions != 0 {
		t.Fatalf("no request was sent, yet %v decisions", decisions)
	}
	if after != before {
		t.Errorf("no request during a 2.5 s Redis stall, yet sluice_redis_caller_timeouts_total went from %v to %v", before, after)
	}
	if n := metricSum(t, r.httpAddr, "sluice_redis_heartbeat_timeouts_total"); n <= beats {
		t.Errorf("a 2.5 s Redis stall under 1 s heartbeats: sluice_redis_heartbeat_timeouts_total went from %v to %v, want it to rise", beats, n)
	}
}
