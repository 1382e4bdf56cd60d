// SPDX-License-Identifier: Apache-2.0

package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/httplimit"
)

const gatewayInFlightYAML = `domain: gateway
descriptors:
  - key: route
    value: GET /slow
    rate_limit: {algorithm: concurrency, requests_per_unit: 2}
    descriptors:
      - key: header:X-Api-Key
        rate_limit: {algorithm: adaptive-concurrency, floor: 1, ceiling: 1}
  - key: route
    value: GET /aimd
    rate_limit: {algorithm: adaptive-concurrency, floor: 1, ceiling: 1, controller: aimd, latency_threshold: 1s}
`

// TestGatewayInFlight: in gateway mode a route-wide concurrency rule
// answers 503 once full and a per-key one 429, with Retry-After and a
// concurrent-requests RateLimit-Policy; slots come back when the upstream
// answers. Over RLS the same descriptors limit nothing.
func TestGatewayInFlight(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": gatewayInFlightYAML})
	release, releaseAIMD := make(chan struct{}), make(chan struct{})
	entered, enteredAIMD := make(chan struct{}, 8), make(chan struct{}, 8)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/aimd" {
			enteredAIMD <- struct{}{}
			<-releaseAIMD
			return
		}
		entered <- struct{}{}
		<-release
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	ip, err := clientip.New()
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
	defer gw.Close()
	do := func(key string) *http.Response {
		req, _ := http.NewRequest("GET", gw.URL+"/slow", nil)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); do("a") }()
	<-entered
	if resp := do("a"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second request of key a: %d Retry-After %q, want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	wg.Add(1)
	go func() { defer wg.Done(); do("b") }()
	<-entered
	resp := do("c")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("third request on the route: %d, want 503 with Retry-After", resp.StatusCode)
	}
	if got, want := resp.Header.Get("RateLimit-Policy"), `"gateway.route_GET /slow";q=2;qu="concurrent-requests"`; got != want {
		t.Fatalf("RateLimit-Policy %q, want %q", got, want)
	}
	close(release)
	wg.Wait()
	for range 3 {
		if resp := do("a"); resp.StatusCode != http.StatusOK {
			t.Fatalf("after the slots came back: %d", resp.StatusCode)
		}
	}
	// The aimd rule, at its ceiling 1: one request at a time.
	wg.Add(1)
	go func() {
		defer wg.Done()
		if resp, err := http.Get(gw.URL + "/aimd"); err == nil {
			resp.Body.Close()
		}
	}()
	<-enteredAIMD
	resp, err = http.Get(gw.URL + "/aimd")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second request under the aimd rule of ceiling 1: %d, want 503", resp.StatusCode)
	}
	close(releaseAIMD)
	wg.Wait()
	// RLS has no release: the rule is no limit there.
	for range 5 {
		if r := h.should(t, GatewayDomain, desc("route", "GET /slow")); r.OverallCode != rls.RateLimitResponse_OK {
			t.Fatalf("RLS on a concurrency rule: %v, want OK", r.OverallCode)
		}
	}
}

// TestGatewayCriticalTrustedOnly: the in-flight reserve is claimed with
// Sluice-Priority: critical only from a trusted proxy; from another peer
// the header is dropped before the limits and the upstream see it.
func TestGatewayCriticalTrustedOnly(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": `domain: gateway
descriptors:
  - key: route
    value: GET /slow
    rate_limit: {algorithm: concurrency, requests_per_unit: 2, critical_reserve: 0.5}
`})
	entered := make(chan chan struct{}, 1) // a held request's release
	seen := make(chan string, 4)           // never blocks the upstream
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			release := make(chan struct{})
			entered <- release
			<-release
			return
		}
		seen <- r.Header.Get(httplimit.CriticalHeader)
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	for _, tc := range []struct {
		trusted  string
		code     int
		upstream string
	}{
		{"10.0.0.0/8", http.StatusServiceUnavailable, ""},
		{"127.0.0.1/32", http.StatusOK, "critical"},
	} {
		ip, err := clientip.New(clientip.TrustProxies(clientip.XForwardedFor, tc.trusted))
		if err != nil {
			t.Fatal(err)
		}
		gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
		do := func(hdr, val string) int {
			req, _ := http.NewRequest("GET", gw.URL+"/slow", nil)
			req.Header.Set(hdr, val)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		// The one ordinary slot (the other is the reserve) is held.
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); do("X-Hold", "1") }()
		release := <-entered
		if code := do(httplimit.CriticalHeader, "critical"); code != tc.code {
			t.Errorf("trusting %s: a critical request with the ordinary slot taken: %d, want %d", tc.trusted, code, tc.code)
		}
		if tc.code == http.StatusOK {
			if got := <-seen; got != tc.upstream {
				t.Errorf("trusting %s: upstream got %s %q, want %q", tc.trusted, httplimit.CriticalHeader, got, tc.upstream)
			}
		}
		close(release)
		wg.Wait()
		// With the slot back, the untrusted request reaches the upstream
		// without the header.
		if code := do(httplimit.CriticalHeader, "critical"); code != http.StatusOK {
			t.Errorf("trusting %s: a critical request with the slots free: %d", tc.trusted, code)
		}
		if got := <-seen; got != tc.upstream {
			t.Errorf("trusting %s: upstream got %s %q, want %q", tc.trusted, httplimit.CriticalHeader, got, tc.upstream)
		}
		gw.Close()
	}
}

// TestGatewayInFlightReserveAdvertised: a route-wide concurrency rule with
// a critical_reserve advertises, to a request that is not critical, the
// slots it may hold (the limit less the reserve) and what is left of them:
// a client pacing itself from the fields never counts on the reserve.
func TestGatewayInFlightReserveAdvertised(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": `domain: gateway
descriptors:
  - key: route
    value: GET /r
    rate_limit: {algorithm: concurrency, requests_per_unit: 4, critical_reserve: 0.5}
`})
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	ip, err := clientip.New()
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	mustGateway(t, h.srv, u, GatewayDomain, ip).ServeHTTP(w, httptest.NewRequest("GET", "/r", nil))
	if got, want := w.Header().Get("RateLimit-Policy"), `"gateway.route_GET /r";q=2;qu="concurrent-requests"`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q (4 less the reserve of 2)", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"gateway.route_GET /r";r=1`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
}
