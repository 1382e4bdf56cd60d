// SPDX-License-Identifier: Apache-2.0

package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// get serves one GET from remote through h and returns the recorder.
func get(h http.Handler, target, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", target, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Limit every client IP to 2 requests per second.
func ExampleNew() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()

	perIP, err := sluice.NewLimiter(store, sluice.Policy{
		Name: "per-ip", Algorithm: sluice.TokenBucket, Limit: 2, Period: time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ip, _ := clientip.New()
	m, err := httplimit.New(httplimit.Global(httplimit.Limit{Limiter: perIP, Key: httplimit.ClientIP(ip)}))
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for range 3 {
		w := get(h, "/", "192.0.2.1:1234")
		fmt.Printf("%d Retry-After=%q RateLimit-Policy: %s RateLimit: %s\n", w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 Retry-After="" RateLimit-Policy: "per-ip";q=2;w=1 RateLimit: "per-ip";r=1;t=1
	// 200 Retry-After="" RateLimit-Policy: "per-ip";q=2;w=1 RateLimit: "per-ip";r=0;t=1
	// 429 Retry-After="1" RateLimit-Policy: "per-ip";q=2;w=1 RateLimit: "per-ip";r=0;t=1
}

// Limit each API key, passed in a header, per route: uploads cost 10 units
// of a key's 100 per minute, reads 1. Requests without a key are not
// limited by this policy. (A sliding window is idle again once the current
// and the previous window have passed: t=120.)
func ExampleHeader() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()

	perKey, _ := sluice.NewLimiter(store, sluice.Policy{
		Name: "per-key", Algorithm: sluice.SlidingWindow, Limit: 100, Period: time.Minute,
	})
	byKey := httplimit.Limit{Limiter: perKey, Key: httplimit.Header("X-API-Key")}
	m, err := httplimit.New(
		httplimit.Route("POST /uploads", 10, byKey),
		httplimit.Route("GET /items/{id}", 1, byKey),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(http.NotFoundHandler())

	for _, target := range []string{"/items/1", "/items/2"} {
		w := get(h, target, "192.0.2.1:1", "X-API-Key", "key-1")
		fmt.Println("GET", target, w.Header().Get("RateLimit"))
	}
	r := httptest.NewRequest("POST", "/uploads", strings.NewReader("..."))
	r.Header.Set("X-API-Key", "key-1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println("POST /uploads", w.Header().Get("RateLimit"))
	// Output:
	// GET /items/1 "per-key";r=99;t=120
	// GET /items/2 "per-key";r=98;t=120
	// POST /uploads "per-key";r=88;t=120
}

// Three limits on one request, checked all-or-nothing: per client IP, per
// API key and per organisation (a user KeyFunc). The organisation's quota
// refuses the third request, and the refused request costs nothing under
// the other two.
func ExampleNew_multipleLimits() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()

	policy := func(name string, limit int64) *sluice.Limiter {
		l, err := sluice.NewLimiter(store, sluice.Policy{Name: name, Algorithm: sluice.GCRA, Limit: limit, Period: time.Minute})
		if err != nil {
			panic(err)
		}
		return l
	}
	ip, _ := clientip.New()
	org := func(r *http.Request) (string, bool) {
		// In real life: the tenant claim of a verified JWT.
		tenant, _, ok := strings.Cut(r.Header.Get("X-API-Key"), ".")
		return tenant, ok
	}
	m, err := httplimit.New(
		httplimit.Global(
			httplimit.Limit{Limiter: policy("per-ip", 60), Key: httplimit.ClientIP(ip)},
			httplimit.Limit{Limiter: policy("per-key", 30), Key: httplimit.Header("X-API-Key")},
			httplimit.Limit{Limiter: policy("per-org", 2), Key: org},
		),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(http.NotFoundHandler())
	for _, key := range []string{"acme.alice", "acme.bob", "acme.carol"} {
		w := get(h, "/", "192.0.2.1:1", "X-API-Key", key)
		fmt.Println(key, w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// acme.alice 404 "per-ip";r=59;t=1, "per-key";r=29;t=2, "per-org";r=1;t=30
	// acme.bob 404 "per-ip";r=58;t=2, "per-key";r=29;t=2, "per-org";r=0;t=60
	// acme.carol 429 "per-ip";r=58, "per-key";r=30, "per-org";r=0;t=30
}
