// SPDX-License-Identifier: Apache-2.0

package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/memstore"
)

// send makes one request to the harness's HTTP API under host (the Host
// header), with header, and returns the status and body.
func (h *harness) send(t *testing.T, method, path, host, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A browser's headers, as a page on evil.example:8080 that rebound its name
// to this server sends them: a current browser's, and an older one's (no
// Sec-Fetch-*, no Origin on a same-origin GET: only its User-Agent).
var (
	rebound = map[string]string{
		"Origin":          "http://evil.example:8080",
		"Sec-Fetch-Site":  "same-origin",
		"Sec-Fetch-Mode":  "cors",
		"Content-Type":    "application/json",
		"User-Agent":      "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/137.0.0.0 Safari/537.36",
		"Accept-Language": "en",
	}
	oldBrowser = map[string]string{
		"User-Agent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/15.6 Safari/605.1.15",
	}
)

// TestDNSRebindingRefused: a page that rebinds its own name to the server's
// address is same-origin with the API (Sec-Fetch-Site: same-origin, its
// Origin matches its Host), so only the Host header gives it away. Such a
// request is refused with 403 on every path, naming the host and
// --allowed-hosts, and changes nothing: a reset does not reset, a check
// takes nothing. On main the reset and the GETs answered 200.
func TestDNSRebindingRefused(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	const host = "evil.example:8080"
	check := `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"x1"}]}]}`
	reset := `{"domain":"rides","descriptors":[{"entries":[{"key":"rider","value":"x1"}]}]}`

	// x1 uses its burst of 3 through a client that is not a browser.
	if n := admittedHTTP(t, h.http.URL, "rides", 4, "rider", "x1"); n != 3 {
		t.Fatalf("rider x1: %d of 4 admitted, want the burst of 3", n)
	}
	code, body := h.send(t, "POST", "/v1/reset", host, reset, rebound)
	if code != http.StatusForbidden || !strings.Contains(body, `Host \"evil.example:8080\" refused`) || !strings.Contains(body, "--allowed-hosts=evil.example") {
		t.Fatalf("rebound reset: %d %s; want 403 naming the host and --allowed-hosts", code, body)
	}
	if n := admittedHTTP(t, h.http.URL, "rides", 1, "rider", "x1"); n != 0 {
		t.Fatal("the refused reset reset rider x1")
	}
	// A rebound check takes nothing.
	for range 3 {
		if code, body := h.send(t, "POST", "/v1/check", host, strings.Replace(check, "x1", "x2", 1), rebound); code != http.StatusForbidden {
			t.Fatalf("rebound check: %d %s, want 403", code, body)
		}
	}
	if n := admittedHTTP(t, h.http.URL, "rides", 4, "rider", "x2"); n != 3 {
		t.Fatalf("rider x2 after 3 refused rebound checks: %d of 4 admitted, want the whole burst of 3", n)
	}
	// Every path, for a current browser and an older one; under the name
	// with and without a port, in any case, and names that only look local.
	paths := []string{"/", "/app.js", "/v1/rules", "/v1/status", "/v1/openapi.json", "/metrics", "/healthz", "/readyz", "/v1/usage?domain=rides&rider=x1"}
	for _, hdr := range []map[string]string{rebound, oldBrowser} {
		for _, p := range paths {
			if code, _ := h.send(t, "GET", p, host, "", hdr); code != http.StatusForbidden {
				t.Errorf("GET %s under %s from %s: %d, want 403", p, host, hdr["User-Agent"], code)
			}
		}
	}
	for _, bad := range []string{"evil.example", "EVIL.Example:8080", "localhost.evil.example:8080", "127.0.0.1.nip.io:8080", "localhost:8080.evil.example", "sluice:8080", "sluice.default.svc"} {
		if code, _ := h.send(t, "GET", "/v1/rules", bad, "", rebound); code != http.StatusForbidden {
			t.Errorf("GET /v1/rules under %q from a browser: %d, want 403", bad, code)
		}
	}
}

// TestBrowserHosts: a browser reaches the API under an IP address,
// localhost, a name under .localhost, and the names WithAllowedHosts
// allows (exact, in any case, with or without a trailing dot; *.domain for
// the names under it, not the domain itself), and nothing else.
func TestBrowserHosts(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML}, WithAllowedHosts("sluice.example.com", "*.corp.example"))
	for _, c := range []struct {
		host string
		want int
	}{
		{"", 200}, // the test server's own 127.0.0.1:port
		{"127.0.0.1:8080", 200},
		{"10.1.2.3", 200},
		{"[::1]:8080", 200},
		{"[2001:db8::1]", 200},
		{"localhost:8080", 200},
		{"LocalHost", 200},
		{"localhost.:8080", 200},
		{"sluice.localhost:8080", 200},
		{"sluice.example.com:8080", 200},
		{"Sluice.Example.COM.", 200},
		{"a.corp.example", 200},
		{"b.a.corp.example:443", 200},
		{"corp.example", 403},
		{"xsluice.example.com", 403},
		{"sluice.example.com.evil.example", 403},
		{"a.corp.example.evil.example", 403},
		{"localhostx:8080", 403},
		{"evil.example:8080", 403},
	} {
		for _, hdr := range []map[string]string{rebound, oldBrowser} {
			if code, _ := h.send(t, "GET", "/v1/rules", c.host, "", hdr); code != c.want {
				t.Errorf("GET /v1/rules under %q from %s: %d, want %d", c.host, hdr["User-Agent"], code, c.want)
			}
		}
	}
	// The page's own POSTs under an allowed name pass the cross-origin
	// check too.
	hdr := map[string]string{"Origin": "http://sluice.example.com:8080", "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
	if code, body := h.send(t, "POST", "/v1/reset", "sluice.example.com:8080", `{"domain":"rides","entries":[{"key":"rider","value":"x"}]}`, hdr); code != 200 {
		t.Errorf("the page's reset under an allowed name: %d %s", code, body)
	}
	// "*" allows any name.
	anyHost := start(t, map[string]string{"rides.yaml": ridesYAML}, WithAllowedHosts("*"))
	if code, _ := anyHost.send(t, "GET", "/v1/rules", "evil.example:8080", "", rebound); code != 200 {
		t.Errorf("WithAllowedHosts(\"*\"): %d", code)
	}
}

// TestNonBrowserAnyHost: clients that are not browsers (the kubelet's
// probes, Prometheus, Envoy, curl, Go) send no Origin, Sec-Fetch-* or
// Mozilla/ User-Agent, and reach every path under any name, as Kubernetes
// and Docker deployments do (deploy/: sluice:8080, service DNS names, pod
// IPs), with nothing configured.
func TestNonBrowserAnyHost(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	check := `{"domain":"rides","descriptors":[{"entries":[{"key":"city","value":"paris"}]}]}`
	for _, host := range []string{"sluice:8080", "sluice.default.svc:8080", "sluice.default.svc.cluster.local", "10.244.1.7:8080", "ratelimit.corp.example.com", "evil.example:8080"} {
		for _, ua := range []string{"kube-probe/1.31", "Prometheus/2.53.0", "curl/8.5.0", "Envoy/1.35", ""} {
			hdr := map[string]string{"User-Agent": ua}
			for _, p := range []string{"/healthz", "/readyz", "/metrics", "/v1/rules", "/v1/status"} {
				if code, _ := h.send(t, "GET", p, host, "", hdr); code != 200 {
					t.Errorf("GET %s under %s by %q: %d, want 200", p, host, ua, code)
				}
			}
			hdr["Content-Type"] = "application/json"
			if code, body := h.send(t, "POST", "/v1/check", host, check, hdr); code != 200 {
				t.Errorf("POST /v1/check under %s by %q: %d %s, want 200", host, ua, code, body)
			}
		}
	}
}

// TestAllowedHostsMalformed: a malformed allowed host is an error naming
// it, from ParseAllowedHosts (serve's flag) and from New.
func TestAllowedHostsMalformed(t *testing.T) {
	got, err := ParseAllowedHosts(" sluice.example.com, *.corp.example ,*,10.0.0.1,[::1]")
	if err != nil || strings.Join(got, "|") != "sluice.example.com|*.corp.example|*|10.0.0.1|[::1]" {
		t.Fatalf("ParseAllowedHosts: %q, %v", got, err)
	}
	if got, err := ParseAllowedHosts(""); err != nil || got != nil {
		t.Fatalf(`ParseAllowedHosts(""): %q, %v; want none`, got, err)
	}
	store := memstore.New()
	defer store.Close()
	for _, bad := range []string{"http://sluice.example.com", "sluice.example.com:8080", "a,,b", "sluice..example", "*.", "**.example", "sl uice", "a/b"} {
		_, err := ParseAllowedHosts(bad)
		if err == nil || !strings.Contains(err.Error(), "allowed host") {
			t.Errorf("ParseAllowedHosts(%q): %v, want an error naming the allowed host", bad, err)
		}
		if _, err := New(store, WithAllowedHosts(bad)); err == nil || !strings.Contains(err.Error(), "allowed host") {
			t.Errorf("New(WithAllowedHosts(%q)): %v, want an error naming the allowed host", bad, err)
		}
	}
}
