// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/internal/config"
)

const gatewayYAML = `domain: gateway
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 5, name: per-ip}
  - key: route
    value: POST /v1/quotes
    descriptors:
      - key: header:X-Api-Key
        rate_limit: {unit: minute, requests_per_unit: 2, name: quotes-per-key}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 1}
`

func TestGateway(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": gatewayYAML})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream saw "+r.Method+" "+r.URL.Path)
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	ip, err := clientip.New()
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
	defer gw.Close()

	do := func(method, path, apiKey string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, gw.URL+path, nil)
		if apiKey != "" {
			req.Header.Set("X-Api-Key", apiKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	// Two quotes with key a, then the route's per-key limit refuses; the
	// refusal does not consume the per-IP limit (all-or-nothing).
	for i := 0; i < 2; i++ {
		if code, body, _ := do("POST", "/v1/quotes", "a"); code != 200 || body != "upstream saw POST /v1/quotes" {
			t.Fatalf("quote %d: %d %q", i, code, body)
		}
	}
	code, _, hdr := do("POST", "/v1/quotes", "a")
	if code != http.StatusTooManyRequests || !strings.Contains(hdr.Get("RateLimit-Policy"), `"quotes-per-key";q=2;w=60`) || hdr.Get("Retry-After") == "" { // the rule by its one name (config.Rule.Title)
		t.Errorf("third quote: %d %v", code, hdr)
	}
	// The per-IP state is the one RLS sees for (remote_address, 127.0.0.1).
	r := h.peek(t, "gateway", desc("remote_address", "127.0.0.1"))
	if r.Statuses[0].LimitRemaining != 3 {
		t.Errorf("per-IP remaining %d after 2 admitted requests, want 3", r.Statuses[0].LimitRemaining)
	}
	// Other paths: only the per-IP limit.
	for i := 0; i < 3; i++ {
		if code, _, _ := do("GET", "/v1/trips", ""); code != 200 {
			t.Fatalf("trips %d: %d", i, code)
		}
	}
	if code, _, _ := do("GET", "/v1/trips", ""); code != http.StatusTooManyRequests {
		t.Errorf("sixth request from one IP: %d", code)
	}

	// A reload with a higher per-IP limit is enforced from the next request.
	c, err := config.Load(mapFS("g.yaml", strings.Replace(gatewayYAML, "requests_per_unit: 5", "requests_per_unit: 7", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do("GET", "/v1/trips", ""); code != 200 {
		t.Errorf("after raising the limit: %d", code)
	}
	// A configuration whose HTTP policies do not build is refused, and
	// the one in force stays.
	c, err = config.Load(mapFS("g.yaml", "domain: gateway\ndescriptors:\n  - key: route\n    value: NOT A PATTERN\n    descriptors:\n      - key: remote_address\n        rate_limit: {unit: minute, requests_per_unit: 1000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Apply(c); err == nil || !strings.Contains(err.Error(), `route "NOT A PATTERN" (g.yaml:7)`) {
		t.Errorf("Apply of an unparsable route: %v", err)
	}
	if code, _, _ := do("GET", "/v1/trips", ""); code != 200 {
		t.Errorf("7th request under the kept policies: %d", code)
	}
	if code, _, _ := do("GET", "/v1/trips", ""); code != http.StatusTooManyRequests {
		t.Errorf("8th request under the kept policies: %d", code)
	}
}

const conflictYAML = `domain: gateway
descriptors:
  - key: route
    value: GET /a/{x}
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: route
    value: GET /{y}/b
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 5}
`

// TestGatewayRouteConflict: two route patterns that conflict are an error
// when the configuration is applied, naming both and their lines; the
// configuration in force stays and keeps being enforced.
func TestGatewayRouteConflict(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": gatewayYAML})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	ip, err := clientip.New()
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
	defer gw.Close()
	c, err := config.Load(mapFS("g.yaml", conflictYAML))
	if err != nil {
		t.Fatal(err)
	}
	const want = `server: gateway domain "gateway": route "GET /{y}/b" (g.yaml:12) conflicts with route "GET /a/{x}" (g.yaml:7): both match some paths, like "/a/b".`
	if err := h.srv.Apply(c); err == nil || err.Error() != want {
		t.Fatalf("Apply of conflicting routes: %v\nwant %s", err, want)
	}
	if h.srv.Config() == c {
		t.Error("the conflicting configuration is in force")
	}
	if err := CheckGateway(c, GatewayDomain); err == nil || "server: "+err.Error() != want {
		t.Errorf("CheckGateway: %v", err)
	}
	if err := CheckGateway(c, "other"); err != nil {
		t.Errorf("CheckGateway of a domain without the routes: %v", err)
	}
	// The previous policies (5 per IP per minute) are still enforced.
	for i := range 6 {
		resp, err := http.Get(gw.URL + "/a/b")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 429}[i < 5]; resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if got := h.get(t, "/readyz"); !strings.HasPrefix(got, "ready") {
		t.Errorf("/readyz: %q", got)
	}

	// A gateway added while the conflicting configuration is in force (no
	// gateway yet to refuse it) is an error.
	h2 := start(t, map[string]string{"gateway.yaml": conflictYAML})
	if _, err := h2.srv.Gateway(u, GatewayDomain, ip); err == nil || !strings.Contains(err.Error(), "conflicts with") {
		t.Errorf("Gateway over a conflicting configuration: %v", err)
	}
}

// TestGatewayGlobalShadowMode: under WithShadowMode (serve --shadow-mode)
// the gateway's rate-limit rules are in shadow mode too: they never refuse.
func TestGatewayGlobalShadowMode(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": gatewayYAML}, WithShadowMode())
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	ip, err := clientip.New()
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
	defer gw.Close()
	for i := range 8 { // the per-IP limit is 5
		resp, err := http.Get(gw.URL + "/v1/trips")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d, want 200 (every rule in shadow mode)", i, resp.StatusCode)
		}
	}
}

// TestGatewayForwardedFor: the upstream gets the X-Forwarded-For chain of
// a trusted proxy with the proxy appended, and only the peer from an
// untrusted one (whose chain could be forged).
func TestGatewayForwardedFor(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": gatewayYAML})
	seen := make(chan string, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- strings.Join(r.Header.Values("X-Forwarded-For"), "|")
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	for _, tc := range []struct{ trusted, want string }{
		{"127.0.0.1/32", "5.5.5.5, 13.1.1.1, 127.0.0.1"},
		{"10.0.0.0/8", "127.0.0.1"},
	} {
		ip, err := clientip.New(clientip.TrustProxies(clientip.XForwardedFor, tc.trusted))
		if err != nil {
			t.Fatal(err)
		}
		gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
		req, _ := http.NewRequest("GET", gw.URL+"/x", nil)
		req.Header.Set("X-Forwarded-For", "5.5.5.5, 13.1.1.1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		gw.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("trusting %s: %d", tc.trusted, resp.StatusCode)
		}
		if got := <-seen; got != tc.want {
			t.Errorf("trusting %s: upstream got X-Forwarded-For %q, want %q", tc.trusted, got, tc.want)
		}
	}
}

// TestGatewayClientIPHeaders: the other client-address headers (X-Real-Ip
// and its kin) reach the upstream only from a trusted proxy; an untrusted
// client's were passed on unchanged.
func TestGatewayClientIPHeaders(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": gatewayYAML})
	seen := make(chan http.Header, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	for _, tc := range []struct {
		trusted string
		kept    bool
	}{{"127.0.0.1/32", true}, {"10.0.0.0/8", false}} {
		ip, err := clientip.New(clientip.TrustProxies(clientip.XForwardedFor, tc.trusted))
		if err != nil {
			t.Fatal(err)
		}
		gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
		req, _ := http.NewRequest("GET", gw.URL+"/x", nil)
		for _, name := range clientIPHeaders {
			req.Header.Set(name, "6.6.6.6")
		}
		req.Header.Set("X-Other", "kept")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		gw.Close()
		got := <-seen
		for _, name := range append([]string{"X-Real-IP", "True-Client-IP", "CF-Connecting-IP"}, clientIPHeaders...) {
			if has := got.Get(name) != ""; has != tc.kept {
				t.Errorf("trusting %s: upstream has %s: %v, want %v", tc.trusted, name, has, tc.kept)
			}
		}
		if got.Get("X-Other") != "kept" {
			t.Errorf("trusting %s: another header was removed", tc.trusted)
		}
	}
}

// mustGateway is srv.Gateway, failing the test on an error.
func mustGateway(t *testing.T, srv *Server, u *url.URL, domain string, ip *clientip.Resolver) *Gateway {
	t.Helper()
	g, err := srv.Gateway(u, domain, ip)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGatewayUpstreamDown: a request the upstream does not answer gets
// 502, and the failures are logged through the server's logger at most
// once a second, with a count, not a standard library line each.
func TestGatewayUpstreamDown(t *testing.T) {
	var logs lockedBuffer
	h := start(t, map[string]string{"gateway.yaml": "domain: gateway\n"}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://" + ln.Addr().String())
	ln.Close() // nothing listens there now: every dial is refused
	ip, err := clientip.New()
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
	defer gw.Close()
	get := func() {
		t.Helper()
		resp, err := http.Get(gw.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("upstream down: %d, want 502", resp.StatusCode)
		}
	}
	lines := func() []string {
		var out []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "upstream failed") {
				out = append(out, l)
			}
		}
		return out
	}
	for range 3 {
		get()
	}
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "failures_since_last_log=1") || !strings.Contains(l[0], "connection refused") {
		t.Fatalf("after 3 failures in one second: %q\n%s", l, logs.String())
	}
	h.clock.Advance(time.Second)
	get()
	if l := lines(); len(l) != 2 || !strings.Contains(l[1], "failures_since_last_log=3") {
		t.Fatalf("a second later: %q", l)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use (a log's).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGatewayLeakyAdvertisesWhatFits: a leaky-bucket rule in gateway mode
// (a queue of 30 draining 1 per second, held at most the default 10 s)
// advertises the 11 requests an idle key admits within the maximum delay
// (q=11), and after an admission the 10 that still fit (r=10), not the
// queue's 30 and 29, 19 of which no request may take (a pacing client
// that trusted them was refused).
func TestGatewayLeakyAdvertisesWhatFits(t *testing.T) {
	h := start(t, map[string]string{"gateway.yaml": `domain: gateway
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky-bucket, burst: 30, name: queue}
`})
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	ip, err := clientip.New()
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(mustGateway(t, h.srv, u, GatewayDomain, ip))
	defer gw.Close()
	resp, err := http.Get(gw.URL + "/v1/trips")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	if got, want := resp.Header.Get("RateLimit-Policy"), `"queue";q=11;w=11`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if got, want := resp.Header.Get("RateLimit"), `"queue";r=10;t=1`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
}
