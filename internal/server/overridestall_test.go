// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/sluicetest"
)

// TestOverridableRuleStalledRedis: with a Sluice-Timeout, "a store call
// ends by it (redisstore: less its margin), and the rule's failure mode
// answers in time" (TimeoutHeader), also for a rule with overridable: true,
// whose key's override is read first: on a Redis that does not answer it
// is answered by its failure mode (open here: admitted), as the same rule
// without overridable is (it answered 504: reading the override waited
// for the caller's whole deadline).
func TestOverridableRuleStalledRedis(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"api.yaml": "domain: api\ndescriptors:\n" +
			"  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 5, overridable: true, failure_mode: open}\n",
		"plain.yaml": "domain: plain\ndescriptors:\n" +
			"  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: open}\n",
	})
	urls, _ := redisFleet(t, addr, dir, 1)
	check := func(domain string) (int, string) {
		t.Helper()
		body := `{"domain":"` + domain + `","descriptors":[{"entries":[{"key":"tenant","value":"acme"}]}]}`
		req, err := http.NewRequest("POST", urls[0]+"/v1/check", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(TimeoutHeader, "1s")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Connected (and the scripts loaded) through the plain domain only.
	if code, body := check("plain"); code != 200 {
		t.Fatalf("plain check on a healthy Redis: %d %s", code, body)
	}
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Do(context.Background(), admin.B().ClientPause().Timeout(2500).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// api first: a call that times out alone closes its connection
	// (rueidis cannot realign it), and a call that then finds the client
	// re-making it waits for that handshake, started by another call,
	// beyond its own bound (a known limit, stated in the package doc of
	// redisstore); plain's check after api's is then bounded by its own.
	for _, domain := range []string{"api", "plain"} {
		code, body := check(domain)
		var r CheckResponse
		json.Unmarshal([]byte(body), &r)
		if code != 200 || !r.Allowed {
			t.Errorf("domain %s (failure_mode: open) on a paused Redis with %s: 1s: %d %s; want 200, allowed by the failure mode", domain, TimeoutHeader, code, body)
		}
	}
}
