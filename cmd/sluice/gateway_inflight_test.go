// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/sluicetest"
)

var gatewayListen = regexp.MustCompile(`msg="sluice gateway" listen=http://(127\.0\.0\.1:\d+)`)

// startGatewayProcess runs "sluice serve --upstream ... args..." as a child
// process and returns its gateway address once it serves.
func startGatewayProcess(t *testing.T, args ...string) (addr string, cmd *exec.Cmd) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"serve", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--gateway-addr", "127.0.0.1:0"}, args...)
	cmd = exec.Command(exe, argv...)
	cmd.Env = append(os.Environ(), envServeChild+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := gatewayListen.FindSubmatch(sc.Bytes()); m != nil {
				found <- string(m[1])
				break
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	select {
	case addr = <-found:
	case <-done:
		t.Fatal("sluice serve exited before its gateway served")
	case <-time.After(60 * time.Second):
		t.Fatal("sluice serve's gateway did not start within 60s")
	}
	return addr, cmd
}

// TestGatewayInFlightFleet: 3 sluice serve gateways (default flags) on one
// real Redis in front of an upstream that holds each request 50-200 ms; 200
// clients. The upstream never sees more than the rule's 20 requests at
// once. Then one gateway is killed (SIGKILL) while it holds 10 slots: the
// other two keep serving with the 10 slots left, and the dead slots admit
// requests again after their TTL and within TTL + 1 s of the kill.
func TestGatewayInFlightFleet(t *testing.T) {
	const limit = 20
	var cur, peak atomic.Int64
	var holding atomic.Int64
	stopHolds := make(chan struct{})
	record := func() {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record()
		defer cur.Add(-1)
		if r.URL.Query().Get("hold") == "1" {
			holding.Add(1)
			defer holding.Add(-1)
			select { // until the gateway goes away, or the test ends
			case <-r.Context().Done():
			case <-stopHolds:
			}
			return
		}
		time.Sleep(time.Duration(50+rand.IntN(151)) * time.Millisecond)
	}))
	defer upstream.Close()
	defer close(stopHolds) // before the upstream closes

	redis := sluicetest.StartRedis(t)
	dir := t.TempDir()
	cfg := "domain: gateway\ndescriptors:\n  - key: route\n    value: GET /work\n    rate_limit: {algorithm: concurrency, requests_per_unit: 20}\n"
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	gws := make([]string, 3)
	cmds := make([]*exec.Cmd, 3)
	for i := range gws {
		gws[i], cmds[i] = startGatewayProcess(t, "--store", "redis://"+redis, "--config", dir, "--upstream", upstream.URL)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}, Timeout: 30 * time.Second}
	get := func(gw int, path string) (int, error) {
		resp, err := client.Get("http://" + gws[gw] + path)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// load runs clients against the gateways in gws[from:] until stop,
	// counting answers by status.
	load := func(clients, from int, stop <-chan struct{}, counts *[600]atomic.Int64) *sync.WaitGroup {
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					code, err := get(from+c%(len(gws)-from), "/work")
					if err != nil {
						t.Error(err)
						return
					}
					counts[code].Add(1)
				}
			}()
		}
		return &wg
	}

	// Phase 1: 200 clients over 3 gateways.
	var counts [600]atomic.Int64
	stop := make(chan struct{})
	wg := load(200, 0, stop, &counts)
	time.Sleep(3 * time.Second) // load for a while; nothing is timed
	close(stop)
	wg.Wait()
	t.Logf("phase 1: upstream peak %d in flight; 200: %d, 503: %d", peak.Load(), counts[200].Load(), counts[503].Load())
	if p := peak.Load(); p > limit {
		t.Fatalf("the upstream saw %d requests in flight at once, limit %d", p, limit)
	}
	if counts[200].Load() == 0 || counts[503].Load() == 0 {
		t.Fatalf("200: %d, 503: %d; want both (the limit should bind)", counts[200].Load(), counts[503].Load())
	}

	// Phase 2: gateway 0 holds 10 slots, then dies. The other two take
	// the 10 free slots, one request at a time; then one more request is
	// tried, one at a time, until a dead slot is reclaimed and admits it.
	holdSent := time.Now()
	for range 10 {
		go get(0, "/work?hold=1")
	}
	for holding.Load() < 10 {
		time.Sleep(time.Millisecond)
	}
	if err := cmds[0].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for holding.Load() > 0 { // the upstream sees the dead gateway's connections close
		time.Sleep(time.Millisecond)
	}
	// holdOne sends a holding request through gateway gw and reports
	// whether the upstream got it (false: refused).
	holdOne := func(gw int) bool {
		before := holding.Load()
		answer := make(chan error, 1) // read only when the request was refused
		go func() {
			_, err := get(gw, "/work?hold=1")
			answer <- err
		}()
		for {
			select {
			case err := <-answer:
				if err != nil {
					t.Error(err)
				}
				return false
			default:
			}
			if holding.Load() > before {
				return true
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	refused := 0
	for n := 0; n < limit-10; {
		if holdOne(1 + n%2) {
			n++
			continue
		}
		refused++
		if time.Since(killed) > inflight.DefaultTTL/2 {
			t.Fatalf("%v after the kill the surviving gateways hold only %d of the %d free slots", time.Since(killed), holding.Load(), limit-10)
		}
	}
	took := time.Now()
	var back time.Time
	for n := 0; time.Since(killed) < inflight.DefaultTTL+5*time.Second; n++ {
		if holdOne(1 + n%2) {
			back = time.Now()
			break
		}
		refused++
	}
	t.Logf("phase 2: the survivors took the 10 free slots %v after the kill; a dead slot admitted a request %v after the kill (%v after it was taken); %d refusals meanwhile; upstream peak %d",
		took.Sub(killed), back.Sub(killed), back.Sub(holdSent), refused, peak.Load())
	if back.IsZero() {
		t.Fatalf("%v after the kill no dead slot had come back", inflight.DefaultTTL+5*time.Second)
	}
	if d := back.Sub(killed); d > inflight.DefaultTTL+time.Second {
		t.Errorf("the dead gateway's slots came back %v after the kill, want within TTL + 1 s = %v", d, inflight.DefaultTTL+time.Second)
	}
	if d := back.Sub(holdSent); d < inflight.DefaultTTL {
		t.Errorf("a dead gateway's slot came back %v after it was taken, before its TTL %v", d, inflight.DefaultTTL)
	}
	if took.Sub(holdSent) >= inflight.DefaultTTL {
		t.Errorf("the survivors needed until %v after the dead slots were taken to use the free ones", took.Sub(holdSent))
	}
	if p := peak.Load(); p > limit {
		t.Errorf("the upstream saw %d requests in flight at once, limit %d", p, limit)
	}
}
