// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServeAllowedHosts: with default flags serve refuses a browser's
// request under a name it was not given (DNS rebinding), with 403 naming
// the host and --allowed-hosts, and answers clients that are not browsers
// under any name (a Kubernetes service's, as deploy/ reaches it); a name
// given with --allowed-hosts is answered to browsers too.
func TestServeAllowedHosts(t *testing.T) {
	get := func(t *testing.T, addr, path, host string, browser bool) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if browser {
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Chrome/137.0.0.0")
		} else {
			req.Header.Set("User-Agent", "kube-probe/1.31")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	r := startServe(t, serveOptions{})
	code, body := get(t, r.httpAddr, "/v1/rules", "evil.example:8080", true)
	if code != http.StatusForbidden || !strings.Contains(body, "evil.example:8080") || !strings.Contains(body, "--allowed-hosts") {
		t.Errorf("defaults, a browser under evil.example: %d %s; want 403 naming the host and --allowed-hosts", code, body)
	}
	for _, host := range []string{r.httpAddr, "localhost:8080"} {
		if code, _ := get(t, r.httpAddr, "/v1/rules", host, true); code != http.StatusOK {
			t.Errorf("defaults, a browser under %s: %d, want 200", host, code)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/rules"} {
		if code, _ := get(t, r.httpAddr, path, "sluice:8080", false); code != http.StatusOK {
			t.Errorf("defaults, a probe under sluice:8080: GET %s %d, want 200", path, code)
		}
	}

	a := startServe(t, serveOptions{allowedHosts: []string{"sluice.example.com"}})
	if code, body := get(t, a.httpAddr, "/v1/rules", "sluice.example.com:8080", true); code != http.StatusOK {
		t.Errorf("--allowed-hosts sluice.example.com, a browser under it: %d %s", code, body)
	}
	if code, _ := get(t, a.httpAddr, "/v1/rules", "evil.example:8080", true); code != http.StatusForbidden {
		t.Errorf("--allowed-hosts sluice.example.com, a browser under evil.example: %d, want 403", code)
	}
}
