// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
)

// Hostile requests (any method, path, host, forwarding headers and API
// key) never panic the middleware, and every answer is 200 or 429 with
// RateLimit headers that parse as Structured Field Values.
func FuzzMiddleware(f *testing.F) {
	f.Add("GET", "/items/1", "api.example", "10.0.0.1:1", "203.0.113.5, 10.0.0.2", "for=1.1.1.1", "key")
	f.Add("POST", "/upload/../upload", "", "[::1]:1", ",,,", `for="[::1]"`, "")
	f.Add("CONNECT", "*", "x:99999", "garbage", "\x00", "\"", strings.Repeat("k", 300))
	store, _ := newStore(f)
	ip, err := clientip.New(clientip.TrustProxies(clientip.XForwardedFor, "10.0.0.0/8", "::1/128"))
	if err != nil {
		f.Fatal(err)
	}
	fwd, _ := clientip.New(clientip.TrustProxies(clientip.Forwarded, "10.0.0.0/8", "::1/128"), clientip.WithIPv6Prefix(56))
	mk := func(name string, alg sluice.Algorithm) *sluice.Limiter {
		return newLimiter(f, store, sluice.Policy{Name: name, Algorithm: alg, Limit: 3, Period: time.Minute})
	}
	m := newMiddleware(f,
		Global(Limit{Limiter: mk("per-ip", sluice.TokenBucket), Key: ip.Key}),
		Route("GET /items/{id}", 1, Limit{Limiter: mk("per-key", sluice.SlidingLog), Key: Header("X-API-Key")}),
		Route("POST /upload", 2, Limit{Limiter: mk("fwd", sluice.FixedWindow), Key: fwd.Key}),
		Route("api.example/", 1, Limit{Limiter: mk("host", sluice.SlidingWindow), Key: Header("X-API-Key"), Shadow: true}),
		WithLegacyHeaders(),
	)
	h := m.Handler(okHandler)
	f.Fuzz(func(t *testing.T, method, path, host, remote, xff, forwarded, key string) {
		r := &http.Request{
			Method: method, URL: &url.URL{Path: path}, Host: host, RemoteAddr: remote,
			Header: http.Header{"X-Forwarded-For": {xff}, "Forwarded": {forwarded}, "X-Api-Key": {key}},
		}
		w := newRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 && w.Code != 429 {
			t.Fatalf("status %d", w.Code)
		}
		if w.Header().Get("RateLimit") != "" {
			parseRateLimit(t, w.Header())
		}
	})
}
