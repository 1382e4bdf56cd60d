// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

func TestPerIP(t *testing.T) {
	store, clock := newStore(t)
	ip, _ := clientip.New()
	lim := newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.TokenBucket, Limit: 2, Period: time.Second})
	h := newMiddleware(t, Global(Limit{Limiter: lim, Key: ip.Key})).Handler(okHandler)

	steps := []struct {
		remote string
		code   int
		r, t   int64
	}{
		{"192.0.2.1:1000", 200, 1, 1},
		{"192.0.2.1:1001", 200, 0, 1},
		{"192.0.2.1:1002", 429, 0, 1}, // t: the same request is admitted in 0.5 s
		{"192.0.2.2:1000", 200, 1, 1}, // another client is unaffected
	}
	for i, s := range steps {
		w := send(h, "GET", "/", s.remote)
		if w.Code != s.code {
			t.Fatalf("step %d: status %d; want %d", i, w.Code, s.code)
		}
		states, policies := parseRateLimit(t, w.Header())
		if got := states["per-ip"]; got != (state{s.r, s.t, true}) {
			t.Errorf("step %d: RateLimit per-ip = %+v; want r=%d t=%d", i, got, s.r, s.t)
		}
		if got := policies["per-ip"]; got != (quotaItem{2, 1}) {
			t.Errorf("step %d: RateLimit-Policy per-ip = %+v; want q=2 w=1", i, got)
		}
		if s.code == 429 {
			if got := retryAfter(t, w); got != time.Second {
				t.Errorf("step %d: Retry-After %v; want 1s (0.5 s rounded up)", i, got)
			}
			p := problemOf(t, w)
			if p.Type != ProblemQuotaExceeded || p.Status != 429 || !slices.Equal(p.Violated, []string{"per-ip"}) {
				t.Errorf("step %d: problem %+v", i, p)
			}
		} else if w.Header().Get("Retry-After") != "" {
			t.Errorf("step %d: Retry-After on an admitted response", i)
		}
	}
	clock.Advance(500 * time.Millisecond)
	if w := send(h, "GET", "/", "192.0.2.1:1003"); w.Code != 200 {
		t.Errorf("after the Retry-After's wait: status %d; want 200", w.Code)
	}
}

// Retry-After is the store's RetryAfter rounded up to whole seconds: never
// earlier than the real wait, less than a second later, and a request sent
// exactly Retry-After later is admitted.
func TestRetryAfterRoundsUp(t *testing.T) {
	store, clock := newStore(t)
	ip, _ := clientip.New()
	p := sluice.Policy{Name: "slow", Algorithm: sluice.GCRA, Limit: 2, Period: 3 * time.Second}
	lim := newLimiter(t, store, p)
	h := newMiddleware(t, Global(Limit{Limiter: lim, Key: ip.Key})).Handler(okHandler)
	ctx := context.Background()
	for _, step := range []time.Duration{0, 1, 7 * time.Millisecond, 499 * time.Millisecond, time.Second, 1500*time.Millisecond - 1} {
		clock.Advance(step)
		// Exhaust the key, then look at the refusal.
		for send(h, "GET", "/", "192.0.2.9:1").Code == 200 {
		}
		d, err := lim.AllowN(ctx, "192.0.2.9", 1)
		if err != nil || d.Allowed {
			t.Fatalf("store: %+v, %v; want a refusal", d, err)
		}
		w := send(h, "GET", "/", "192.0.2.9:1")
		ra := retryAfter(t, w)
		if ra < d.RetryAfter || ra >= d.RetryAfter+time.Second {
			t.Fatalf("at %v: Retry-After %v for a real wait of %v", clock.Now().Sub(t0), ra, d.RetryAfter)
		}
		states, _ := parseRateLimit(t, w.Header())
		if s := states["slow"]; s.t*int64(time.Second) > int64(ra) {
			t.Errorf("RateLimit t=%d is later than Retry-After %v", s.t, ra)
		}
		clock.Advance(ra)
		if w := send(h, "GET", "/", "192.0.2.9:1"); w.Code != 200 {
			t.Fatalf("retrying exactly Retry-After (%v) later: status %d", ra, w.Code)
		}
	}
}

// A request refused by one limit consumes nothing from the others.
func TestAllOrNothing(t *testing.T) {
	store, _ := newStore(t)
	ip, _ := clientip.New()
	perIP := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}), Key: ip.Key}
	perKey := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "per-key", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute}), Key: Header("X-API-Key")}
	h := newMiddleware(t, Global(perIP, perKey)).Handler(okHandler)

	w := send(h, "GET", "/", "192.0.2.1:1", "X-API-Key", "k1")
	if w.Code != 200 {
		t.Fatalf("first: %d", w.Code)
	}
	for range 3 {
		w = send(h, "GET", "/", "192.0.2.1:1", "X-API-Key", "k1")
		if w.Code != 429 {
			t.Fatalf("second key use: %d; want 429", w.Code)
		}
		if p := problemOf(t, w); !slices.Equal(p.Violated, []string{"per-key"}) {
			t.Errorf("violated-policies %v; want [per-key]", p.Violated)
		}
		states, _ := parseRateLimit(t, w.Header())
		if states["per-ip"] != (state{r: 9}) || states["per-key"].r != 0 || !states["per-key"].hasT {
			t.Errorf("after refusals: %+v; want per-ip r=9 (untouched) without t, per-key r=0 with t", states)
		}
		if ra := retryAfter(t, w); time.Duration(states["per-key"].t)*time.Second > ra {
			t.Errorf("per-key t=%d later than Retry-After %v", states["per-key"].t, ra)
		}
	}
	// A request without an API key counts under per-key's shared key.
	w = send(h, "GET", "/", "192.0.2.1:1")
	states, _ := parseRateLimit(t, w.Header())
	if w.Code != 200 || len(states) != 2 || states["per-ip"].r != 8 || states["per-key"].r != 0 {
		t.Errorf("without a key: %d %+v; want 200, per-ip r=8 and per-key r=0", w.Code, states)
	}
}

// TestMissingKey: a request a limit has no key for (no API key header) is
// limited under one shared key by default, refused with 400 by
// MissingRefused, and let past that limit only by MissingSkipped (defect 9:
// every request without the header went through unlimited).
func TestMissingKey(t *testing.T) {
	for _, c := range []struct {
		missing Missing
		codes   []int // of 3 requests without the header, at 2 per minute
	}{
		{MissingShared, []int{200, 200, 429}},
		{MissingRefused, []int{400, 400, 400}},
		{MissingSkipped, []int{200, 200, 200}},
	} {
		store, _ := newStore(t)
		perKey := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "per-key", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute}),
			Key: Header("X-API-Key"), Missing: c.missing}
		m := newMiddleware(t, Global(perKey))
		h := m.Handler(okHandler)
		for i, want := range c.codes {
			if w := send(h, "GET", "/", "192.0.2.1:1"); w.Code != want {
				t.Errorf("Missing %d: request %d without a key: %d, want %d", c.missing, i, w.Code, want)
			}
		}
		// A request with a key is limited under its own.
		if w := send(h, "GET", "/", "192.0.2.1:1", "X-API-Key", "k"); w.Code != 200 {
			t.Errorf("Missing %d: with a key: %d, want 200", c.missing, w.Code)
		}
		if c.missing == MissingRefused {
			if st := m.Stats(); st.Malformed != 3 {
				t.Errorf("Stats %+v, want 3 malformed", st)
			}
		}
	}
}

func TestRoutes(t *testing.T) {
	store, _ := newStore(t)
	ip, _ := clientip.New()
	mk := func(name string, limit int64) Limit {
		return Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: name, Algorithm: sluice.TokenBucket, Limit: limit, Period: time.Hour}), Key: ip.Key}
	}
	items, upload, other, global := mk("items", 100), mk("upload", 10), mk("other", 100), mk("global", 1000)
	m := newMiddleware(t,
		Global(global),
		Route("GET /items/{id}", 1, items),
		Route("POST /upload", 4, upload),
		Route("GET example.com/hosted/", 2, items),
		Default(3, other),
	)
	h := m.Handler(okHandler)
	cases := []struct {
		method, target string
		policies       []string
		globalLeft     int64
	}{
		{"GET", "/items/7", []string{"global", "items"}, 999},
		{"HEAD", "/items/7", []string{"global", "items"}, 998}, // GET patterns match HEAD
		{"POST", "/upload", []string{"global", "upload"}, 994},
		{"GET", "/upload", []string{"global", "other"}, 991},  // method mismatch: no route
		{"GET", "/nowhere", []string{"global", "other"}, 988}, // no route
		{"GET", "/items//7", []string{"global", "items"}, 987},
		{"GET", "http://example.com/hosted/x", []string{"global", "items"}, 985},
		{"GET", "http://example.org/hosted/x", []string{"global", "other"}, 982},
	}
	for _, c := range cases {
		w := send(h, c.method, c.target, "192.0.2.1:1")
		states, _ := parseRateLimit(t, w.Header())
		var names []string
		for n := range states {
			names = append(names, n)
		}
		slices.Sort(names)
		if !slices.Equal(names, c.policies) || states["global"].r != c.globalLeft {
			t.Errorf("%s %s: policies %v, global r=%d; want %v, %d", c.method, c.target, names, states["global"].r, c.policies, c.globalLeft)
		}
	}
	// Cost 4 against a burst of 10: two uploads, then refused.
	w := send(h, "POST", "/upload", "192.0.2.1:1")
	if states, _ := parseRateLimit(t, w.Header()); w.Code != 200 || states["upload"].r != 2 {
		t.Errorf("second upload: %d %+v; want 200, upload r=2", w.Code, states)
	}
	if w := send(h, "POST", "/upload", "192.0.2.1:1"); w.Code != 429 {
		t.Errorf("third upload: %d; want 429", w.Code)
	}
}

// Without Default or Global, requests no route matches pass untouched.
func TestUnmatchedPassThrough(t *testing.T) {
	store, _ := newStore(t)
	ip, _ := clientip.New()
	l := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "a", Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour}), Key: ip.Key}
	h := newMiddleware(t, Route("/limited", 1, l)).Handler(okHandler)
	for range 3 {
		if w := send(h, "GET", "/free", "192.0.2.1:1"); w.Code != 200 || w.Header().Get("RateLimit") != "" {
			t.Fatalf("unmatched: %d %v", w.Code, w.Header())
		}
	}
	send(h, "GET", "/limited", "192.0.2.1:1")
	if w := send(h, "GET", "/limited", "192.0.2.1:1"); w.Code != 429 {
		t.Fatalf("limited: %d", w.Code)
	}
}

// A client that sends the victim's address in X-Forwarded-For does not
// touch the victim's quota, whether it connects directly or through the
// trusted proxy.
func TestSpoofedForwardedFor(t *testing.T) {
	store, _ := newStore(t)
	ip, err := clientip.New(clientip.TrustProxies(clientip.XForwardedFor, "10.0.0.0/8"))
	if err != nil {
		t.Fatal(err)
	}
	lim := newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Minute})
	h := newMiddleware(t, Global(Limit{Limiter: lim, Key: ip.Key})).Handler(okHandler)

	const victim = "192.0.2.1"
	for i := range 20 {
		// Directly, from an untrusted peer: the header is ignored.
		w := send(h, "GET", "/", "198.51.100.7:4000", "X-Forwarded-For", victim)
		// Through the proxy, which appends the attacker's address.
		w2 := send(h, "GET", "/", "10.0.0.1:5000", "X-Forwarded-For", victim+", 198.51.100.7")
		if i >= 5 && (w.Code != 429 || w2.Code != 429) {
			t.Fatalf("attack %d: %d, %d; want the attacker limited", i, w.Code, w2.Code)
		}
	}
	if k, _ := ip.Key(httptestRequest("198.51.100.7:4000", "X-Forwarded-For", victim)); k != "198.51.100.7" {
		t.Errorf("spoofed key %q; want the peer's address", k)
	}
	w := send(h, "GET", "/", "10.0.0.1:5001", "X-Forwarded-For", victim)
	states, _ := parseRateLimit(t, w.Header())
	if w.Code != 200 || states["per-ip"].r != 4 {
		t.Errorf("victim through the proxy: %d, %+v; want 200 with r=4 (a full bucket less one)", w.Code, states)
	}
}

func TestShadow(t *testing.T) {
	store, _ := newStore(t)
	ip, _ := clientip.New()
	enforced := newLimiter(t, store, sluice.Policy{Name: "enforced", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Minute})
	shadowP := sluice.Policy{Name: "candidate", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute}
	shadow := newLimiter(t, store, shadowP)
	var mu sync.Mutex
	var seen []ShadowRefusal
	m := newMiddleware(t,
		Route("/", 1, Limit{Limiter: enforced, Key: ip.Key}, Limit{Limiter: shadow, Key: ip.Key, Shadow: true}),
		OnShadowRefusal(func(r *http.Request, s ShadowRefusal) {
			mu.Lock()
			seen = append(seen, s)
			mu.Unlock()
		}),
	)
	h := m.Handler(okHandler)
	codes := []int{}
	for range 5 {
		w := send(h, "GET", "/", "192.0.2.1:1")
		codes = append(codes, w.Code)
		if strings.Contains(w.Header().Get("RateLimit-Policy"), "candidate") {
			t.Errorf("shadow policy advertised: %q", w.Header().Get("RateLimit-Policy"))
		}
	}
	if !slices.Equal(codes, []int{200, 200, 200, 429, 429}) {
		t.Errorf("codes %v; want the enforced limit of 3 only", codes)
	}
	// The shadow limit would have refused requests 2 to 5.
	if st := m.Stats(); st.ShadowRefused != 4 || st.Admitted != 3 || st.Refused != 2 {
		t.Errorf("stats %+v", st)
	}
	if len(seen) != 4 || seen[0].Policy.Name != "candidate" || seen[0].Key != "192.0.2.1" || seen[0].Route != "/" || seen[0].Decision.Allowed {
		t.Errorf("hook saw %+v", seen)
	}
	// Only the admitted request consumed shadow quota.
	d, err := store.Take(context.Background(), shadowP, "192.0.2.1", 0)
	if err != nil || d.Remaining != 0 {
		t.Errorf("shadow state: %+v, %v; want remaining 0", d, err)
	}

	// When the enforced limit refuses, the shadow one consumes nothing.
	store2, _ := newStore(t)
	enf := newLimiter(t, store2, sluice.Policy{Name: "enforced", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute})
	wide := sluice.Policy{Name: "wide", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Minute}
	h2 := newMiddleware(t, Global(Limit{Limiter: enf, Key: ip.Key}, Limit{Limiter: newLimiter(t, store2, wide), Key: ip.Key, Shadow: true})).Handler(okHandler)
	send(h2, "GET", "/", "192.0.2.1:1")
	send(h2, "GET", "/", "192.0.2.1:1")
	if d, _ := store2.Take(context.Background(), wide, "192.0.2.1", 0); d.Remaining != 4 {
		t.Errorf("shadow remaining %d; want 4 (only the admitted request counts)", d.Remaining)
	}
}

func TestStoreFailure(t *testing.T) {
	ip, _ := clientip.New()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}
	q := sluice.Policy{Name: "q", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}
	for _, c := range []struct {
		name       string
		modes      []sluice.FailureMode
		code       int
		retryAfter string
	}{
		{"open", []sluice.FailureMode{sluice.FailOpen}, 200, ""},
		{"closed", []sluice.FailureMode{sluice.FailClosed}, 503, "5"},
		{"mixed", []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed}, 503, "5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, _ := newStore(t)
			o := &outage{Store: store}
			var limits []Limit
			for i, mode := range c.modes {
				limits = append(limits, Limit{Limiter: newLimiter(t, o, []sluice.Policy{p, q}[i], sluice.WithFailureMode(mode)), Key: ip.Key})
			}
			var errs []error
			m := newMiddleware(t, Global(limits...), WithUnavailableRetryAfter(4500*time.Millisecond),
				OnError(func(r *http.Request, err error) { errs = append(errs, err) }))
			o.down.Store(true)
			w := send(m.Handler(okHandler), "GET", "/", "192.0.2.1:1")
			if w.Code != c.code || w.Header().Get("Retry-After") != c.retryAfter {
				t.Errorf("status %d, Retry-After %q; want %d, %q", w.Code, w.Header().Get("Retry-After"), c.code, c.retryAfter)
			}
			if len(errs) != 1 {
				t.Errorf("OnError saw %v; want one error", errs)
			}
			if c.code == 503 {
				if p := problemOf(t, w); p.Status != 503 {
					t.Errorf("problem %+v", p)
				}
			}
			if st := m.Stats(); st.Errors != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestLegacyHeaders(t *testing.T) {
	store, clock := newStore(t)
	ip, _ := clientip.New()
	a := newLimiter(t, store, sluice.Policy{Name: "a", Algorithm: sluice.TokenBucket, Limit: 10, Period: 10 * time.Second, Burst: 5})
	b := newLimiter(t, store, sluice.Policy{Name: "b", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Minute})
	h := newMiddleware(t, WithLegacyHeaders(), Global(Limit{Limiter: a, Key: ip.Key}, Limit{Limiter: b, Key: ip.Key})).Handler(okHandler)
	clock.Advance(15 * time.Second)
	w := send(h, "GET", "/", "192.0.2.1:1")
	// a: 4 of 5 left, full again in 1 s; b: 2 of 3 left, its window ends in 45 s.
	_, policies := parseRateLimit(t, w.Header())
	if policies["a"] != (quotaItem{5, 5}) || policies["b"] != (quotaItem{3, 60}) {
		t.Errorf("RateLimit-Policy %+v; want a q=5 w=5 (a burst of 5 refills in 5 s), b q=3 w=60", policies)
	}
	got := []string{w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("X-RateLimit-Reset")}
	if !slices.Equal(got, []string{"3", "2", "45"}) {
		t.Errorf("legacy headers %v; want b's: 3, 2, 45", got)
	}
}

func TestRetryJitter(t *testing.T) {
	store, _ := newStore(t)
	ip, _ := clientip.New()
	lim := newLimiter(t, store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: 3 * time.Second})
	h := newMiddleware(t, WithRetryJitter(10*time.Second), Global(Limit{Limiter: lim, Key: ip.Key})).Handler(okHandler)
	send(h, "GET", "/", "192.0.2.1:1")
	seen := map[time.Duration]bool{}
	for range 100 {
		ra := retryAfter(t, send(h, "GET", "/", "192.0.2.1:1"))
		if ra < 3*time.Second || ra > 13*time.Second {
			t.Fatalf("Retry-After %v; want 3 s plus less than 10 s", ra)
		}
		seen[ra] = true
	}
	if len(seen) < 2 {
		t.Errorf("100 refusals all had Retry-After %v: no jitter", seen)
	}
}

func TestConfigErrors(t *testing.T) {
	store, _ := newStore(t)
	ip, _ := clientip.New()
	named := func(name string) Limit {
		return Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: name, Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 8}), Key: ip.Key}
	}
	cases := []struct {
		opts []Option
		want string
	}{
		{[]Option{Route("GET", 1, named("a"))}, `Route "GET"`},
		{[]Option{Route("GET /x/{", 1, named("a"))}, `Route "GET /x/{"`},
		{[]Option{Route("/x", 1, named("a")), Route("/x", 1, named("b"))}, `Route "/x"`},
		{[]Option{Route("/x", -1, named("a"))}, "cost -1"},
		// A zero cost would limit nothing (on main it was accepted).
		{[]Option{Route("/x", 0, named("a"))}, `route "/x": cost 0: must be at least 1`},
		{[]Option{Default(0, named("a"))}, `Default: cost 0: must be at least 1`},
		{[]Option{Route("/x", 9, named("a"))}, `cost 9 exceeds the capacity 8 of policy "a"`},
		{[]Option{Route("/x", 1, named(""))}, "no Name"},
		{[]Option{Route("/x", 1, named("caf\u00e9"))}, "not printable ASCII"},
		{[]Option{Global(named("a")), Route("/x", 1, named("a"))}, `route "/x": limit 0: policy Name "a" is already used by Global limit 0`},
		{[]Option{Route("/x", 1, Limit{Key: ip.Key})}, `route "/x": limit 0: Limiter is nil`},
		// Defect 12: a limit is named by its index where it was given, not
		// counting the Global limits.
		{[]Option{Global(named("g")), Route("/x", 1, named("a"), Limit{Key: ip.Key})}, `route "/x": limit 1: Limiter is nil`},
		{[]Option{Global(named("g")), Route("/x", 1, named("a"), Limit{Limiter: named("b").Limiter})}, `route "/x": limit 1: Key is nil`},
		{[]Option{Global(named("g"), named("")), Route("/x", 1)}, `httplimit: Global limit 1: policy has no Name`},
		// A zero sluice.Limiter (not made by NewLimiter) is named as such
		// (the error spoke of a cost over a capacity of 0).
		{[]Option{Route("/x", 1, Limit{Limiter: &sluice.Limiter{}, Key: ip.Key})}, `route "/x": limit 0: the Limiter has no store (make it with sluice.NewLimiter)`},
		{[]Option{Default(1), Default(2)}, "Default given twice"},
		{[]Option{WithMaxDelay(-1)}, "WithMaxDelay"},
		{[]Option{WithRetryJitter(-1)}, "WithRetryJitter"},
		{[]Option{WithUnavailableRetryAfter(0)}, "WithUnavailableRetryAfter"},
	}
	for _, c := range cases {
		_, err := New(c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v; want an error containing %q", err, c.want)
		}
	}
}

// TestConfigErrorsNameTheCulprit: New names what the user gave. A mistake
// in a Global limit is blamed on it ("Global limit 0"), not on Default,
// which the user never gave, nor on a route it was added to; a Route or
// InFlight pattern ServeMux refuses is named with the line of the user's
// call and the pattern it conflicts with, never a line of this package's
// source or a path of the machine that built it.
func TestConfigErrorsNameTheCulprit(t *testing.T) {
	store, _ := newStore(t)
	ok := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "ok", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}), Key: Header("X-API-Key")}
	accented := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "\u00e9", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}), Key: Header("X-API-Key")}
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{Global(Limit{Key: Header("X-API-Key")})}, "httplimit: Global limit 0: Limiter is nil"},
		{[]Option{Global(accented)}, "httplimit: Global limit 0: policy name \"\u00e9\": byte 0xc3 at 0 is not printable ASCII"},
		{[]Option{Route("/x", 1, ok), Global(ok, Limit{Limiter: ok.Limiter})}, "httplimit: Global limit 1: Key is nil"},
	} {
		if _, err := New(c.opts...); err == nil || err.Error() != c.want {
			t.Errorf("got %v; want %q", err, c.want)
		}
	}
	_, file, line, _ := runtime.Caller(0)
	first := Route("GET /a", 1, ok)
	second := Route("GET /a", 1, ok)
	wide := InFlight("GET /{y}/b", InFlightLimit{InFlight: newInFlight(t, store, "f")})
	narrow := InFlight("GET /a/{x}", InFlightLimit{InFlight: newInFlight(t, store, "f")})
	at := func(n int) string { return fmt.Sprintf("%s:%d", filepath.Base(file), line+n) }
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{first, second}, `httplimit: Route "GET /a" (at ` + at(2) + `) conflicts with Route "GET /a" (at ` + at(1) + `): both match the same requests.`},
		{[]Option{wide, narrow}, `httplimit: InFlight "GET /a/{x}" (at ` + at(4) + `) conflicts with InFlight "GET /{y}/b" (at ` + at(3) + `): both match some paths, like "/a/b".`},
	} {
		_, err := New(c.opts...)
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v; want %q", err, c.want)
		}
	}
}

// TestConfigErrorsEmptyHeaderName: Header("") (or a name of spaces) names
// no header, so a limit keyed by it would count every request under the
// one key of the requests without a key; New refuses it, naming the
// option, the limit and the value.
func TestConfigErrorsEmptyHeaderName(t *testing.T) {
	store, _ := newStore(t)
	l := newLimiter(t, store, sluice.Policy{Name: "a", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second})
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{Global(Limit{Limiter: l, Key: Header("")})}, `httplimit: Global limit 0: Key Header("") or a name of spaces: no request carries such a header`},
		{[]Option{Route("/x", 1, Limit{Limiter: l, Key: Header(" ")})}, `httplimit: route "/x": limit 0: Key Header("") or a name of spaces: no request carries such a header`},
		{[]Option{InFlight("/x", InFlightLimit{InFlight: newInFlight(t, store, "f"), Key: Header("")})}, `httplimit: InFlight "/x": limit 0: Key Header("") or a name of spaces: no request carries such a header`},
	} {
		if _, err := New(c.opts...); err == nil || err.Error() != c.want {
			t.Errorf("got %v; want %q", err, c.want)
		}
	}
	if _, err := New(Global(Limit{Limiter: l, Key: Header("X-API-Key")}), InFlight("", InFlightLimit{InFlight: newInFlight(t, store, "f"), Key: ClientIP(nil)})); err != nil {
		t.Errorf("a header name and ClientIP: %v", err)
	}
}

// newInFlight returns an in-flight limit of 2 named name.
func newInFlight(t *testing.T, store *memstore.Store, name string) *inflight.Limiter {
	t.Helper()
	f, err := inflight.New(store, name, 2)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func httptestRequest(remote string, hdr ...string) *http.Request {
	r, _ := http.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

// Under concurrent load exactly the limit is admitted, whatever the shadow
// limit (which refuses most requests and so makes the middleware decide
// twice) does.
func TestConcurrentExactlyTheLimit(t *testing.T) {
	store, _ := newStore(t)
	ip, _ := clientip.New()
	enforced := newLimiter(t, store, sluice.Policy{Name: "enforced", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Hour})
	shadow := newLimiter(t, store, sluice.Policy{Name: "shadow", Algorithm: sluice.GCRA, Limit: 10, Period: time.Hour})
	m := newMiddleware(t, Global(Limit{Limiter: enforced, Key: ip.Key}, Limit{Limiter: shadow, Key: ip.Key, Shadow: true}))
	h := m.Handler(okHandler)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for g := range 16 {
		wg.Go(func() {
			for range 40 {
				w := send(h, "GET", "/", "192.0.2.1:"+strings.Repeat("1", 1+g%4))
				mu.Lock()
				codes[w.Code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if codes[200] != 100 || codes[429] != 540 {
		t.Errorf("codes %v; want 100 admitted and 540 refused", codes)
	}
	if st := m.Stats(); st.ShadowRefused != 630 {
		t.Errorf("shadow refusals %d; want 630 (all but the first 10)", st.ShadowRefused)
	}
	if d, _ := shadow.AllowN(context.Background(), "192.0.2.1", 0); d.Remaining != 0 {
		t.Errorf("shadow remaining %d", d.Remaining)
	}
}

// TestStoreFailureLocal: a limit that fails local decides with its share
// while the store fails: 200 until the share is spent, then 429 (a limit's
// refusal, with Retry-After), not 503.
func TestStoreFailureLocal(t *testing.T) {
	ip, _ := clientip.New()
	store, clock := newStore(t)
	local := memstore.New(memstore.WithClock(clock))
	defer local.Close()
	o := &outage{Store: store}
	l := newLimiter(t, o, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 4, Period: time.Minute},
		sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, sluice.FixedReplicas(2)))
	m := newMiddleware(t, Global(Limit{Limiter: l, Key: ip.Key}))
	o.down.Store(true)
	for i, want := range []int{200, 200, 429} {
		w := send(m.Handler(okHandler), "GET", "/", "192.0.2.1:1")
		if w.Code != want || (want == 429 && w.Header().Get("Retry-After") == "") {
			t.Errorf("request %d: status %d, Retry-After %q; want %d (a share of 2 of 4)", i, w.Code, w.Header().Get("Retry-After"), want)
		}
	}
	if st := m.Stats(); st.Errors != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestClientGone: a request whose client has gone (its context cancelled)
// is never passed to the handler and is no store error, whatever the
// failure mode (defect 6: 10 cancelled requests at 1/hour all reached the
// handler, each counted as a store error).
func TestClientGone(t *testing.T) {
	for _, mode := range []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed} {
		store, _ := newStore(t)
		l := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "hourly", Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Hour},
			sluice.WithFailureMode(mode)), Key: Header("X-API-Key")}
		m := newMiddleware(t, Global(l))
		reached := 0
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }))
		for range 10 {
			r := httptestRequest("192.0.2.1:1", "X-API-Key", "k")
			ctx, cancel := context.WithCancel(r.Context())
			cancel()
			h.ServeHTTP(newRecorder(), r.WithContext(ctx))
		}
		if st := m.Stats(); reached != 0 || st.Gone != 10 || st.Errors != 0 || st.Admitted != 0 {
			t.Errorf("%v: %d reached the handler, stats %+v; want none, 10 gone, no errors", mode, reached, st)
		}
	}
}

// TestClientGoneInFlight: a client gone before its in-flight slot is taken
// is not counted as a store error (it was, and answered 503).
func TestClientGoneInFlight(t *testing.T) {
	m, h, reached := inFlightOnly(t)
	r := httptestRequest("192.0.2.1:1")
	ctx, cancel := context.WithCancel(r.Context())
	cancel()
	h.ServeHTTP(newRecorder(), r.WithContext(ctx))
	if st := m.Stats(); *reached != 0 || st.Gone != 1 || st.Errors != 0 || st.Unavailable != 0 {
		t.Errorf("%d reached the handler, stats %+v; want none, 1 gone, no errors", *reached, st)
	}
}
