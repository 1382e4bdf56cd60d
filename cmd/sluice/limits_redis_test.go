// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetest"
)

// TestServeProcessesOverride is issue 23's test with real processes: 3
// sluice serve processes on one Redis. A tenant's limit changed through one
// process's API decides the next request on every process, survives a
// reload of the files, and is refused without the token.
func TestServeProcessesOverride(t *testing.T) {
	redis := sluicetest.StartRedis(t)
	dir := t.TempDir()
	const cfg = "domain: api\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: day, requests_per_unit: 2, algorithm: gcra, overridable: true}\n"
	if err := os.WriteFile(filepath.Join(dir, "api.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("ops 0123456789abcdef-ops\n"), 0o600)
	var hosts []string
	for range 3 {
		_, h, _, _ := startServeProcessOn(t, "", "--store", "redis://"+redis, "--config", dir, "--admin-token-file", tokens)
		hosts = append(hosts, "http://"+h)
	}
	call := func(method, url, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	admitted := func(host string, n int) int {
		t.Helper()
		got := 0
		for range n {
			code, body := call("POST", host+"/v1/check", "", `{"domain":"api","descriptors":[{"entries":[{"key":"tenant","value":"acme"}]}]}`)
			var r struct{ Allowed bool }
			json.Unmarshal([]byte(body), &r)
			if code != 200 {
				t.Fatalf("check: %d %s", code, body)
			}
			if r.Allowed {
				got++
			}
		}
		return got
	}
	if code, body := call("PUT", hosts[0]+"/v1/limits/api/tenant=acme", "", `{"requests_per_unit":6}`); code != 401 {
		t.Fatalf("PUT without the token: %d %s", code, body)
	}
	if n := admitted(hosts[1], 3); n != 2 {
		t.Fatalf("before: %d admitted, want the default 2", n)
	}
	if code, body := call("PUT", hosts[0]+"/v1/limits/api/tenant=acme", "0123456789abcdef-ops", `{"requests_per_unit":6}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if n := admitted(hosts[1], 3) + admitted(hosts[2], 3) + admitted(hosts[0], 3); n != 6 {
		t.Errorf("after the PUT on process 0: %d admitted over the 3, want the override's 6", n)
	}
	// A reload of the files (a rule added) keeps the override: the key
	// stays at its 6 on every process.
	if err := os.WriteFile(filepath.Join(dir, "api.yaml"), []byte(cfg+"  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, rules := call("GET", h+"/v1/rules", "", "")
			if strings.Contains(rules, "api.user") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not reload within 30s", h)
			}
			time.Sleep(20 * time.Millisecond) // polling for the reload, no assertion on time
		}
	}
	for i, h := range hosts {
		code, body := call("GET", h+"/v1/limits/api/tenant=acme", "0123456789abcdef-ops", "")
		if code != 200 || !strings.Contains(body, `"effective":{"requests_per_unit":6`) {
			t.Errorf("process %d after the reload: %d %s", i, code, body)
		}
	}
	if n := admitted(hosts[2], 2); n != 0 {
		t.Errorf("after the reload: %d admitted, want 0 (the override's 6 spent)", n)
	}
}
