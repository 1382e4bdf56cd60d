// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/sluicetest"
)

// envServeChild makes the test binary run sluice with its arguments instead
// of the tests: the child processes of TestServeProcessesShareRedis.
const envServeChild = "SLUICE_TEST_RUN_SLUICE"

func TestMain(m *testing.M) {
	if os.Getenv(envServeChild) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

var servingGRPC = regexp.MustCompile(`msg="sluice serving" grpc=(127\.0\.0\.1:\d+) .* http=http://(127\.0\.0\.1:\d+)`)

// startServeProcess runs "sluice serve args..." as a child process and
// returns its gRPC address once it logs that it serves.
func startServeProcess(t testing.TB, args ...string) (addr string, cmd *exec.Cmd, exited chan error) {
	t.Helper()
	addr, _, cmd, exited = startServeProcessOn(t, "", args...)
	return addr, cmd, exited
}

// startServeProcessOn is startServeProcess with the child pinned to the
// CPUs in the taskset list cpus, if it is not empty; it also returns the
// HTTP address.
func startServeProcessOn(t testing.TB, cpus string, args ...string) (addr, httpAddr string, cmd *exec.Cmd, exited chan error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{exe, "serve", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}, args...)
	if cpus != "" {
		// taskset sets the affinity before exec, so the Go runtime of the
		// child sizes GOMAXPROCS to those CPUs.
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	cmd = exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), envServeChild+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	found := make(chan [2]string, 1)
	done := make(chan struct{})
	var killed atomic.Bool
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		var log []byte
		for sc.Scan() {
			log = append(append(log, sc.Bytes()...), '\n')
			if m := servingGRPC.FindSubmatch(sc.Bytes()); m != nil {
				found <- [2]string{string(m[1]), string(m[2])}
				// Keep the pipe drained, and show warnings and errors
				// (a failing store, say) in the test's log.
				for sc.Scan() {
					if line := sc.Text(); strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
						t.Logf("sluice serve: %s", line)
					}
				}
				io.Copy(io.Discard, stderr)
				break
			}
		}
		err := cmd.Wait()
		if err != nil && !killed.Load() {
			t.Logf("sluice serve: %v\n%s", err, log)
		}
		exited <- err
	}()
	t.Cleanup(func() {
		killed.Store(true)
		cmd.Process.Kill()
		<-done // no logging after the test ends
	})
	select {
	case a := <-found:
		addr, httpAddr = a[0], a[1]
	case err := <-exited:
		t.Fatalf("sluice serve exited before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("sluice serve did not start within 60s")
	}
	return addr, httpAddr, cmd, exited
}

// TestServeProcessesShareRedis: 3 sluice serve processes, with default
// flags, share one real Redis; 64 concurrent gRPC clients spread over them
// make 20,000 requests at one descriptor limited to 1,000 per day: exactly
// 1,000 are OK.
func TestServeProcessesShareRedis(t *testing.T) {
	// A sliding log, so no window boundary can fall inside the test.
	shareRedis(t, "domain: fleet\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 1000, algorithm: sliding-log, failure_mode: closed}\n")
}

// TestServeProcessesShareRedisDefaultFailureMode is
// TestServeProcessesShareRedis with a rule that has no failure_mode (local,
// the default), and it checks that no request was decided by the failure
// mode: every serve's sluice_store_errors_total stays 0.
func TestServeProcessesShareRedisDefaultFailureMode(t *testing.T) {
	shareRedis(t, "domain: fleet\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 1000, algorithm: sliding-log}\n")
}

// shareRedis runs TestServeProcessesShareRedis with the configuration cfg.
func shareRedis(t *testing.T, cfg string) {
	redis := sluicetest.StartRedis(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	type proc struct {
		addr, httpAddr string
		cmd            *exec.Cmd
		exited         chan error
	}
	procs := make([]proc, 3)
	for i := range procs {
		addr, httpAddr, cmd, exited := startServeProcessOn(t, "", "--store", "redis://"+redis, "--config", dir)
		procs[i] = proc{addr, httpAddr, cmd, exited}
	}
	clients := make([]rls.RateLimitServiceClient, len(procs))
	for i, p := range procs {
		clients[i], _ = rlsClient(t, p.addr)
	}
	const total = 20000
	var next, ok, over atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < 64; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := clients[c%len(clients)]
			for next.Add(1) <= total {
				resp, err := client.ShouldRateLimit(context.Background(), rlsRequest("fleet", "tenant", "acme"))
				if err != nil {
					t.Error(err)
					return
				}
				switch resp.OverallCode {
				case rls.RateLimitResponse_OK:
					ok.Add(1)
				case rls.RateLimitResponse_OVER_LIMIT:
					over.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1000 || over.Load() != total-1000 {
		t.Errorf("OK %d, OVER_LIMIT %d; want exactly 1000 and %d", ok.Load(), over.Load(), total-1000)
	}
	var calls float64
	for i, p := range procs {
		if n := metricSum(t, p.httpAddr, "sluice_store_errors_total"); n != 0 {
			t.Errorf("process %d: sluice_store_errors_total %v, want 0: requests were decided by the failure mode, not by Redis", i, n)
		}
		if n := metricSum(t, p.httpAddr, "sluice_redis_errors_total"); n != 0 {
			t.Errorf("process %d: sluice_redis_errors_total %v, want 0", i, n)
		}
		calls += metricSum(t, p.httpAddr, "sluice_redis_calls_total")
	}
	if calls < total {
		t.Errorf("sluice_redis_calls_total over the processes: %v, want at least one per request (%d)", calls, total)
	}
	// All at once: each serves out its lame duck (--lame-duck) first.
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		select {
		case err := <-p.exited:
			if err != nil {
				t.Errorf("process %d after SIGTERM: %v", i, err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("process %d did not stop after SIGTERM", i)
		}
	}
}

// metricSum returns the sum of the samples of the metric name (any labels)
// on serve's /metrics at httpAddr.
func metricSum(t testing.TB, httpAddr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name); !ok || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// TestServeRedisCluster: on a real 3-master Redis Cluster, with
// --redis-single-slot, a request with several descriptors is
// all-or-nothing: refused by one, it consumes nothing from the others.
func TestServeRedisCluster(t *testing.T) {
	nodes := sluicetest.StartRedisCluster(t, 3)
	dir := t.TempDir()
	cfg := "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 10}\n  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, _, _ := startServeProcess(t, "--store", "redis+cluster://"+strings.Join(nodes, ","), "--redis-single-slot", "sluice", "--config", dir)
	client, _ := rlsClient(t, addr)
	two := func() *rls.RateLimitResponse {
		t.Helper()
		req := rlsRequest("d", "a", "x")
		req.Descriptors = append(req.Descriptors, rlsRequest("d", "b", "y").Descriptors...)
		resp, err := client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := two(); r.OverallCode != rls.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 9 || r.Statuses[1].LimitRemaining != 0 {
		t.Fatalf("first: %v", r)
	}
	for i := 0; i < 3; i++ {
		r := two()
		if r.OverallCode != rls.RateLimitResponse_OVER_LIMIT || r.Statuses[0].Code != rls.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 9 {
			t.Fatalf("refused %d: %v", i, r)
		}
	}
}
