// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/sluicetest"
)

// envoyRatelimit is the envoyproxy/ratelimit that BenchmarkServeVsEnvoy
// builds from the Go module proxy: its main branch on 2026-01-22 (it has
// no tagged release since v1.4.0).
const envoyRatelimit = "github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36"

// BenchmarkServeVsEnvoy runs sluice serve and envoyproxy/ratelimit (the
// rate limit service Envoy's RLS filter was written for) on one load: the
// same YAML rule of 100 a second, each on a fresh redis-server, both with
// their default settings, and BenchmarkServe's gRPC client keeping 64
// ShouldRateLimit calls in flight over 100,000 descriptor values
// (values=100000: every decision is its key's first in its window) or
// 1,000 (values=1000: most are later ones). It reports Redis's CPU per
// request (redis-cpu-µs/req, INFO cpu), the server's own, the rate and the
// latency. envoy ratelimit has only fixed windows; sluice runs the rule as
// a fixed window (the default of every envoy-format rule) and as a token
// bucket. envoy ratelimit is built with go install on first use (into the
// user cache directory), which needs the Go module proxy:
//
//	go test -run '^$' -bench BenchmarkServeVsEnvoy -benchtime 100000x ./cmd/sluice
func BenchmarkServeVsEnvoy(b *testing.B) {
	envoy := buildEnvoyRatelimit(b)
	dir := b.TempDir()
	rules := map[string]string{
		"fixed-window": "domain: load\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 100}\n",
		"token-bucket": "domain: load\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token-bucket}\n",
	}
	for alg, rule := range rules {
		if err := os.MkdirAll(filepath.Join(dir, alg, "ratelimit", "config"), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, alg, "ratelimit", "config", "load.yaml"), []byte(rule), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	const inflight = 64
	for _, values := range []int{100_000, 1000} {
		for _, c := range []struct{ server, alg string }{{"envoy", "fixed-window"}, {"sluice", "fixed-window"}, {"sluice", "token-bucket"}} {
			b.Run(fmt.Sprintf("values=%d/server=%s/alg=%s", values, c.server, c.alg), func(b *testing.B) {
				redisAddr := sluicetest.StartRedis(b)
				var addr, httpAddr string
				var pid int
				if c.server == "sluice" {
					var cmd *exec.Cmd
					addr, httpAddr, cmd, _ = startServeProcessOn(b, "", "--store", "redis://"+redisAddr, "--config", filepath.Join(dir, c.alg, "ratelimit", "config"))
					pid = cmd.Process.Pid
				} else {
					addr, pid = startEnvoyRatelimit(b, envoy, filepath.Join(dir, c.alg), redisAddr)
				}
				loadServe(b, addr, httpAddr, redisAddr, pid, inflight, values)
			})
		}
	}
}

// buildEnvoyRatelimit installs envoyRatelimit into the user cache
// directory, unless it is there already, and returns its path.
func buildEnvoyRatelimit(b *testing.B) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(cache, "sluice-bench", "envoy-ratelimit-v1.4.1-0.20260122083618-3fb702589d36")
	exe := filepath.Join(bin, "service_cmd")
	if _, err := os.Stat(exe); err == nil {
		return exe
	}
	cmd := exec.Command("go", "install", envoyRatelimit)
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go install %s (it needs the Go module proxy): %v\n%s", envoyRatelimit, err, out)
	}
	return exe
}

// startEnvoyRatelimit starts envoy ratelimit with its rules in
// root/ratelimit/config, on the redis-server at redisAddr, and returns its
// gRPC address and pid once it answers. Only what it cannot run without
// is set: where its rules and Redis are, free ports, and no statsd (there
// is none to send to).
func startEnvoyRatelimit(b *testing.B, exe, root, redisAddr string) (addr string, pid int) {
	port := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	grpcPort := port()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(),
		"RUNTIME_ROOT="+root, "RUNTIME_SUBDIRECTORY=ratelimit",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr, "USE_STATSD=false",
		"HOST=127.0.0.1", "PORT="+port(), "GRPC_HOST=127.0.0.1", "GRPC_PORT="+grpcPort,
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+port())
	var log bytes.Buffer // its statsd-less stats sink logs every flush
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr = "127.0.0.1:" + grpcPort
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	req := &rls.RateLimitRequest{Domain: "load", Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "warm"}},
	}}}
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := rls.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
		cancel()
		if err == nil && len(resp.GetStatuses()) == 1 && resp.GetStatuses()[0].GetCurrentLimit() != nil {
			return addr, cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			b.Fatalf("envoy ratelimit did not answer with its rule within 30 s: %v %v\n%s", resp, err, log.Bytes())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
