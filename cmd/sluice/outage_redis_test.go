// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/sluicetest"
)

// TestServeRedisOutage: 3 sluice serve processes with default flags share
// one real Redis, which is killed mid-run. The rule has no failure_mode, so
// it fails local: each replica, which counted 3 replicas by heartbeats,
// decides alone with ⌊N/3⌋. Every request is answered (no gRPC error); the
// requests admitted during the outage reach, and do not pass, the bound of
// the sluice package documentation for a sliding log,
// R·⌊N/R⌋·(⌊D/P⌋+1) = 3·333·1 = 999 for N = 999 per day; once Redis is
// back (empty) it decides again.
func TestServeRedisOutage(t *testing.T) {
	const (
		replicas = 3
		limit    = 999
		before   = 600  // requests while Redis is up: all admitted
		during   = 1000 // requests per replica while Redis is down
	)
	redis := sluicetest.StartRedisServer(t)
	dir := t.TempDir()
	cfg := "domain: fleet\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 999, algorithm: sliding-log}\n"
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	clients := make([]rls.RateLimitServiceClient, replicas)
	httpAddrs := make([]string, replicas)
	for i := range clients {
		addr, httpAddr, _, _ := startServeProcessOn(t, "", "--store", "redis://"+redis.Addr, "--config", dir)
		clients[i], _ = rlsClient(t, addr)
		httpAddrs[i] = httpAddr
	}
	// The replicas count each other within a heartbeat interval or two.
	deadline := time.Now().Add(30 * time.Second)
	for i, h := range httpAddrs {
		for metricSum(t, h, "sluice_replicas") != replicas {
			if time.Now().After(deadline) {
				t.Fatalf("process %d counts %v replicas after 30s, want %d", i, metricSum(t, h, "sluice_replicas"), replicas)
			}
			time.Sleep(50 * time.Millisecond) // polling the heartbeats
		}
	}

	// run makes n requests on each replica from 64 concurrent clients (each
	// bound to one replica) and returns how many were OK.
	run := func(n int) int64 {
		var ok atomic.Int64
		var wg sync.WaitGroup
		left := make([]atomic.Int64, replicas)
		for c := 0; c < 64; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := c % replicas
				for left[r].Add(1) <= int64(n) {
					resp, err := clients[r].ShouldRateLimit(context.Background(), rlsRequest("fleet", "tenant", "acme"))
					if err != nil {
						t.Errorf("replica %d: %v", r, err)
						return
					}
					if resp.OverallCode == rls.RateLimitResponse_OK {
						ok.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return ok.Load()
	}

	if ok := run(before / replicas); ok != before {
		t.Fatalf("with Redis up: %d OK of %d, want all (the limit is %d)", ok, before, limit)
	}
	for i, h := range httpAddrs {
		if n := metricSum(t, h, "sluice_store_errors_total"); n != 0 {
			t.Fatalf("process %d: %v store errors with Redis up", i, n)
		}
	}
	redis.Kill()
	killed := time.Now()
	ok := run(during)
	outage := time.Since(killed)
	// For a sliding log: R·⌊N/R⌋·(⌊D/P⌋+1); D is far below a day.
	bound := int64(replicas * (limit / replicas) * (int(outage/(24*time.Hour)) + 1))
	t.Logf("outage of %v: %d OK of %d requests; bound %d; admitted overall %d (store %d + outage %d)", outage, ok, replicas*during, bound, before+ok, before, ok)
	if ok > bound {
		t.Fatalf("admitted %d during the outage, over the bound %d", ok, bound)
	}
	if ok != bound {
		t.Fatalf("admitted %d during the outage, want the bound %d: each replica had %d requests for its share of %d", ok, bound, during, limit/replicas)
	}
	for i, h := range httpAddrs {
		if n := metricSum(t, h, "sluice_store_errors_total"); n < during {
			t.Errorf("process %d: %v store errors during the outage, want at least %d", i, n, during)
		}
	}

	// Redis comes back, empty: the store is the truth again, and admits
	// (every local share is spent, so an OK can only come from Redis).
	redis.Restart()
	for i, c := range clients {
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := c.ShouldRateLimit(context.Background(), rlsRequest("fleet", "tenant", "acme"))
			if err != nil {
				t.Fatalf("replica %d after the restart: %v", i, err)
			}
			if resp.OverallCode == rls.RateLimitResponse_OK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d: Redis not used again 30s after its restart", i)
			}
			time.Sleep(20 * time.Millisecond) // polling the breaker's probe
		}
	}
}

// TestServeStoreDownAtStart: a Redis that does not answer at start is
// logged, not fatal, and the rules' failure mode (the default, local)
// answers; a Redis that refuses the URL's database is logged with its
// reason.
func TestServeStoreDownAtStart(t *testing.T) {
	redis := sluicetest.StartRedisServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := startServe(t, serveOptions{configDir: dir, storeURL: "redis://" + redis.Addr + "/99"})
	if want := `msg="the store does not answer; serving, with each rule's failure mode deciding until it does"`; !strings.Contains(bad.stderr.String(), want) || !strings.Contains(bad.stderr.String(), "DB index") {
		t.Errorf("database 99: the log lacks %s with Redis's reason:\n%s", want, bad.stderr)
	}
	redis.Kill()
	r := startServe(t, serveOptions{configDir: dir, storeURL: "redis://" + redis.Addr})
	if !strings.Contains(r.stderr.String(), "the store does not answer") {
		t.Errorf("Redis down: the log does not say so:\n%s", r.stderr)
	}
	if n := metricSum(t, r.httpAddr, "sluice_redis_dial_errors_total"); n < 1 {
		t.Errorf("Redis down: sluice_redis_dial_errors_total %v, want at least 1", n)
	}
	client, _ := rlsClient(t, r.grpcAddr)
	for i, want := range []rls.RateLimitResponse_Code{rls.RateLimitResponse_OK, rls.RateLimitResponse_OVER_LIMIT} {
		resp, err := client.ShouldRateLimit(context.Background(), rlsRequest("d", "k", "v"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.OverallCode != want {
			t.Errorf("request %d while Redis is down: %v, want %v (the local failure mode)", i, resp.OverallCode, want)
		}
	}
}

// TestServeLogsRecovery: while Redis is down serve warns (the store
// failures, the heartbeats); when it is back and the circuit breaker closes
// again, serve says so in one INFO line, with how long the store had been
// failing, so that the log of an outage has an end. Nothing is logged as
// recovered while Redis is down.
func TestServeLogsRecovery(t *testing.T) {
	redis := sluicetest.StartRedisServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000000}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startServe(t, serveOptions{configDir: dir, storeURL: "redis://" + redis.Addr})
	client, _ := rlsClient(t, r.grpcAddr)
	check := func() {
		t.Helper()
		if _, err := client.ShouldRateLimit(context.Background(), rlsRequest("d", "k", "v")); err != nil {
			t.Fatal(err)
		}
	}
	check()
	const msg = `msg="the store recovered`
	redis.Kill()
	killed := time.Now()
	for metricSum(t, r.httpAddr, "sluice_redis_breaker_open") != 1 {
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("Redis killed 30 s ago, and the breaker is not open:\n%s", r.stderr)
		}
		check()
	}
	time.Sleep(500 * time.Millisecond) // an outage of a few cooldowns
	if strings.Contains(r.stderr.String(), msg) {
		t.Fatalf("Redis down, yet the log says it recovered:\n%s", r.stderr)
	}
	redis.Restart()
	restarted := time.Now()
	for metricSum(t, r.httpAddr, "sluice_redis_breaker_open") != 0 {
		if time.Since(restarted) > 30*time.Second {
			t.Fatalf("Redis back 30 s ago, and the breaker is still open:\n%s", r.stderr)
		}
		check()
		time.Sleep(10 * time.Millisecond) // polling the breaker's probe
	}
	back := time.Now()
	for range 10 {
		check()
	}
	var lines []string
	for _, l := range strings.Split(r.stderr.String(), "\n") {
		if strings.Contains(l, msg) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("one outage: %d lines say the store recovered, want 1:\n%s", len(lines), r.stderr)
	}
	_, v, ok := strings.Cut(lines[0], " failing_for=")
	v, _, _ = strings.Cut(v, " ")
	failing, err := time.ParseDuration(v)
	if !strings.Contains(lines[0], "level=INFO") || !ok || err != nil || failing <= 0 || failing > back.Sub(killed) {
		t.Errorf("the recovery line %q: want level=INFO and failing_for, the time the store failed (at most %v)", lines[0], back.Sub(killed))
	}
	t.Log(lines[0])
}
