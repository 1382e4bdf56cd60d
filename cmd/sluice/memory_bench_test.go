// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// BenchmarkServeMemory: a sluice serve process with default flags (memory
// store, the default key budget) on a per-day rule is sent 2 million
// distinct descriptor values (IPv6 client addresses) by 64 concurrent gRPC
// clients. Reported: the keys held, serve's peak and final RSS (VmHWM,
// VmRSS), and RSS per key held. It fails if the peak RSS passes the
// documented bound: rssBase + 2 × bytesPerKey × keys held (the keys' live
// data, doubled for the garbage collector's headroom at GOGC=100, over the
// idle process). It runs with the default budget (on a large host: all 2M
// held) and with --max-keys 500000, the budget of a container limited to
// 256 MB, where eviction keeps the keys, and so the RSS, bounded.
//
//	go test -run '^$' -bench BenchmarkServeMemory -benchtime 1x ./cmd/sluice
func BenchmarkServeMemory(b *testing.B) {
	for _, budget := range []string{"auto", "500000"} {
		b.Run("max-keys="+budget, func(b *testing.B) { serveMemory(b, budget) })
	}
}

func serveMemory(b *testing.B, maxKeys string) {
	const values = 2_000_000
	dir := b.TempDir()
	cfg := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: day, requests_per_unit: 1000}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	args := []string{"--config", dir}
	if maxKeys != "auto" {
		args = append(args, "--max-keys", maxKeys)
	}
	addr, httpAddr, cmd, _ := startServeProcessOn(b, "", args...)
	pid := cmd.Process.Pid
	idle := procStatusKB(b, pid, "VmRSS")
	conns := make([]rls.RateLimitServiceClient, 4)
	for i := range conns {
		conns[i], _ = rlsClient(b, addr)
	}
	b.ResetTimer()
	for range b.N {
		var next atomic.Int64
		var wg sync.WaitGroup
		for c := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := conns[c%len(conns)]
				for {
					i := next.Add(1)
					if i > values {
						return
					}
					ip := fmt.Sprintf("2001:db8:%x:%x::%x", i>>32&0xffff, i>>16&0xffff, i&0xffff)
					if _, err := client.ShouldRateLimit(context.Background(), rlsRequest("edge", "remote_address", ip)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	keys := metricSum(b, httpAddr, "sluice_store_keys")
	budget := metricSum(b, httpAddr, "sluice_store_max_keys")
	peak, rss := procStatusKB(b, pid, "VmHWM"), procStatusKB(b, pid, "VmRSS")
	b.ReportMetric(keys, "keys")
	b.ReportMetric(metricSum(b, httpAddr, `sluice_store_evictions_total{reason="forced"}`), "forced-evictions")
	b.ReportMetric(float64(idle)/1024, "idle-RSS-MiB")
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
	b.ReportMetric(float64(rss)/1024, "RSS-MiB")
	b.ReportMetric(float64(rss-idle)*1024/keys, "RSS-bytes/key")
	bound := rssBase + 2*bytesPerKey*int64(keys)
	b.Logf("%v keys held (budget %v); RSS idle %d KiB, peak %d KiB, now %d KiB; bound %d KiB", keys, budget, idle, peak, rss, bound>>10)
	if peak<<10 > bound {
		b.Errorf("peak RSS %d KiB over the bound rssBase + 2·%d·keys = %d KiB", peak, bytesPerKey, bound>>10)
	}
}

// rssBase is BenchmarkServeMemory's allowance for serve without keys (its
// idle RSS is about 20 MiB; BENCHMARKS.md).
const rssBase = 64 << 20

// procStatusKB returns the field (VmRSS, VmHWM, ...) of /proc/pid/status in KiB.
func procStatusKB(b *testing.B, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				b.Fatalf("/proc/%d/status: %q", pid, line)
			}
			return n
		}
	}
	b.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}
