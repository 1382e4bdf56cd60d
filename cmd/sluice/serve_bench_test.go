// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/sluicetest"
)

// BenchmarkServe is the load benchmark of sluice serve as Envoy uses it: a
// separate serve process, and a Go gRPC load client (in the benchmark's
// process) keeping 16 or 64 ShouldRateLimit calls in flight over 100,000
// distinct descriptor values, on the memory store and on Redis. Reported:
// requests/s, p50 and p99 latency as the client sees it, the serve
// process's CPU time (user + system, from /proc) per request, and on Redis
// redis-server's (INFO cpu) per request.
//
// It runs every case twice. With cpus=shared all three processes (load
// client, redis-server, sluice serve) may run on every CPU, as the machine
// schedules them. With cpus=split (on a machine with two or more CPUs) the
// serve process has the last CPU to itself and the load client and Redis
// share the others (taskset, from util-linux), so that what serve's CPU time
// measures is its own work and not its contention with the load client.
// Each runs with plain sockets (the default) and with --raw-sockets.
//
//	go test -run '^$' -bench BenchmarkServe -benchtime 100000x ./cmd/sluice
func BenchmarkServe(b *testing.B) {
	dir := b.TempDir()
	cfg := "domain: load\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 100}\n"
	if err := os.WriteFile(filepath.Join(dir, "load.yaml"), []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	modes := []string{"shared"}
	if runtime.NumCPU() >= 2 {
		modes = append(modes, "split")
	}
	for _, mode := range modes {
		b.Run("cpus="+mode, func(b *testing.B) {
			var serveCPU string
			if mode == "split" {
				serveCPU = splitCPUs(b)
			}
			for _, store := range []string{"mem", "redis"} {
				for _, sockets := range []string{"plain", "raw"} {
					b.Run("store="+store+"/sockets="+sockets, func(b *testing.B) {
						args := []string{"--store", "memory", "--config", dir}
						var redisAddr string
						if store == "redis" {
							redisAddr = sluicetest.StartRedis(b)
							args = []string{"--store", "redis://" + redisAddr, "--config", dir}
						}
						if sockets == "raw" {
							args = append(args, "--raw-sockets")
						}
						addr, httpAddr, cmd, _ := startServeProcessOn(b, serveCPU, args...)
						pid := cmd.Process.Pid
						for _, inflight := range []int{16, 64} {
							b.Run("inflight="+strconv.Itoa(inflight), func(b *testing.B) { loadServe(b, addr, httpAddr, redisAddr, pid, inflight, 100_000) })
						}
					})
				}
			}
		})
	}
}

// splitCPUs pins this process (every thread, and so the processes it starts
// from now on: redis-server) to all CPUs but the last, and returns the last
// one's number for the serve process. The pinning is undone at the end of b.
func splitCPUs(b *testing.B) string {
	if _, err := exec.LookPath("taskset"); err != nil {
		b.Fatal("cpus=split needs taskset (Debian package util-linux): ", err)
	}
	n := runtime.NumCPU()
	pin := func(cpus string) {
		out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(os.Getpid())).CombinedOutput()
		if err != nil {
			b.Fatalf("taskset -a -p -c %s: %v\n%s", cpus, err, out)
		}
	}
	pin(fmt.Sprintf("0-%d", n-2))
	procs := runtime.GOMAXPROCS(n - 1)
	b.Cleanup(func() {
		runtime.GOMAXPROCS(procs)
		pin(fmt.Sprintf("0-%d", n-1))
	})
	return strconv.Itoa(n - 1)
}

// loadServe sends b.N requests to the serve process pid at addr, inflight
// at a time, over values distinct descriptor values, and reports them;
// with redisAddr (its store) not "", also Redis's CPU per request (INFO
// cpu: user + system). httpAddr is sluice serve's, whose metrics must show
// no store error; "" for another server.
func loadServe(b *testing.B, addr, httpAddr, redisAddr string, pid, inflight, values int) {
	conns := make([]rls.RateLimitServiceClient, 4)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = rls.NewRateLimitServiceClient(c)
	}
	reqs := make([]*rls.RateLimitRequest, values)
	for i := range reqs {
		reqs[i] = &rls.RateLimitRequest{Domain: "load", Descriptors: []*rlcommon.RateLimitDescriptor{{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "u" + strconv.Itoa(i)}},
		}}}
	}
	// Warm up the connections.
	for _, c := range conns {
		if _, err := c.ShouldRateLimit(context.Background(), reqs[0]); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	var storeErrors0 int64
	if httpAddr != "" {
		storeErrors0 = storeErrors(b, httpAddr)
	}
	cpu0 := procCPU(b, pid)
	redis0 := redisCPU(b, redisAddr)
	calls0 := redisCalls(b, redisAddr)
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < inflight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := conns[w%len(conns)]
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t := time.Now()
				if _, err := c.ShouldRateLimit(context.Background(), reqs[(i*7919)%int64(values)]); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := procCPU(b, pid) - cpu0
	redis := redisCPU(b, redisAddr) - redis0
	calls := redisCalls(b, redisAddr)
	// A request the store failed (a timeout) is answered by the rule's
	// failure mode without Redis, so its cost is not a decision's: the
	// figures stand only if there were none.
	if httpAddr == "" {
		// Not sluice: its metrics are not read.
	} else if n := storeErrors(b, httpAddr) - storeErrors0; n > 0 {
		b.Errorf("%d store errors during the run (sluice_store_errors_total): the figures are not of decisions made", n)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "server-cpu-µs/req")
	if redisAddr != "" {
		b.ReportMetric(float64(redis.Microseconds())/float64(b.N), "redis-cpu-µs/req")
		var all, scripts int64
		for name, n := range calls {
			n -= calls0[name]
			all += n
			if name == "evalsha" || name == "eval" || name == "evalsha_ro" || name == "eval_ro" {
				scripts += n
			}
		}
		b.ReportMetric(float64(all-scripts)/float64(b.N), "redis-cmds/req")
		b.ReportMetric(float64(scripts)/float64(b.N), "redis-scripts/req")
	}
}

// redisCalls returns the calls per command of the redis-server at addr
// (INFO commandstats: a script's commands count as commands, the script as
// an evalsha), or nil for addr "".
func redisCalls(b *testing.B, addr string) map[string]int64 {
	if addr == "" {
		return nil
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	calls := map[string]int64{}
	for line := range strings.Lines(info) {
		// cmdstat_hincrby:calls=5,usec=...
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return calls
}

// redisCPU returns the CPU time (user + system) the redis-server at addr
// has used (INFO cpu), or 0 for addr "".
func redisCPU(b *testing.B, addr string) time.Duration {
	if addr == "" {
		return 0
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	info, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	for line := range strings.Lines(info) {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_user" || name == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %q: %v", line, err)
			}
			cpu += time.Duration(f * float64(time.Second))
		}
	}
	return cpu
}

// storeErrors returns the sum of serve's sluice_store_errors_total
// counters.
func storeErrors(b testing.TB, httpAddr string) int64 {
	return int64(metricSum(b, httpAddr, "sluice_store_errors_total"))
}

// procCPU returns the user + system CPU time of process pid so far.
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses: state is
	// field 3, utime 14 and stime 15 (clock ticks of 1/100 s on Linux).
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parsing /proc/%d/stat: %q", pid, s)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
