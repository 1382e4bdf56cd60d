// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

// TestGoneAnswered503: a request whose context ended before it was let
// through (here a deadline set on the server's side, the client still
// waiting) gets 503, not net/http's empty 200; it never reaches the
// handler and counts as Gone.
func TestGoneAnswered503(t *testing.T) {
	store, _ := newStore(t)
	l := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "hourly", Algorithm: sluice.TokenBucket, Limit: 100, Period: time.Hour}),
		Key: Header("X-API-Key")}
	m := newMiddleware(t, Global(l))
	reached := 0
	inner := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithDeadline(r.Context(), time.Unix(1, 0)) // long past
		defer cancel()
		inner.ServeHTTP(w, r.WithContext(ctx))
	}))
	defer srv.Close()
	req, err := http.NewRequest("GET", srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", "k")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if st := m.Stats(); reached != 0 || st.Gone != 1 || st.Admitted != 0 {
		t.Fatalf("handler reached %d times, stats %+v; want the request gone", reached, st)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a request that was not let through: %d %q; want 503", resp.StatusCode, body)
	}
}

// TestAdmittedCountsHandlerCalls: Stats.Admitted counts the requests that
// reach the handler, once each: with only an in-flight limit, and when the
// rate limit admits a request that the in-flight limit then refuses.
func TestAdmittedCountsHandlerCalls(t *testing.T) {
	t.Run("in-flight only", func(t *testing.T) {
		m, h, reached := inFlightOnly(t)
		for range 3 {
			h.ServeHTTP(httptest.NewRecorder(), httptestRequest("192.0.2.1:1"))
		}
		if st := m.Stats(); *reached != 3 || st.Admitted != 3 {
			t.Fatalf("%d requests reached the handler; stats %+v, want Admitted 3", *reached, st)
		}
	})
	t.Run("rate admits, in-flight refuses", func(t *testing.T) {
		m, w := inFlightRefusalAfterRate(t)
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("second request: %d, want 429", w.Code)
		}
		if st := m.Stats(); st.Admitted != 1 || st.Refused != 1 {
			t.Fatalf("1 request reached the handler, 1 was refused; stats %+v", st)
		}
	})
}

// TestInFlightRefusalResets: a request the rate limits admit and a keyed
// in-flight limit refuses gets 429 whose RateLimit items carry no reset
// (t) later than its Retry-After: on a refusal only the violated policy
// has one.
func TestInFlightRefusalResets(t *testing.T) {
	_, w := inFlightRefusalAfterRate(t)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("second request: %d, want 429", w.Code)
	}
	ra := retryAfter(t, w)
	items, err := parseSFList(w.Header().Values("RateLimit"))
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 {
		t.Fatalf("RateLimit %q: want the rate policy's item and the in-flight one's", w.Header().Values("RateLimit"))
	}
	for _, it := range items {
		if v, ok := it.param("t"); ok && time.Duration(v.(int64))*time.Second > ra {
			t.Fatalf("429 with Retry-After %v has a reset after it: %q", ra, w.Header().Values("RateLimit"))
		}
	}
}

// TestErrorsCountRequests: Stats.Errors counts the requests the store
// could not decide, once each, as Admitted counts requests: with a rate
// limit and two in-flight limits over one store that is down (all failing
// open, the defaults), 3 requests are 3 errors, not one per failed limit.
// A request whose rates the store decides and whose in-flight limit it
// does not counts once too.
func TestErrorsCountRequests(t *testing.T) {
	mem, _ := newStore(t)
	store := &outage{Store: mem}
	rate := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "per-key", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}), Key: Header("X-API-Key")}
	busy, err := inflight.New(store, "busy", 8)
	if err != nil {
		t.Fatal(err)
	}
	perKey, err := inflight.New(store, "per-key-conc", 2)
	if err != nil {
		t.Fatal(err)
	}
	m := newMiddleware(t, Global(rate),
		InFlight("", InFlightLimit{InFlight: busy}),
		InFlight("GET /", InFlightLimit{InFlight: perKey, Key: Header("X-API-Key")}))
	h := m.Handler(okHandler)
	store.down.Store(true)
	const n = 3
	for range n {
		if w := send(h, "GET", "/", "192.0.2.1:1", "X-API-Key", "k1"); w.Code != http.StatusOK {
			t.Fatalf("a request over a store that is down, every limit failing open: %d", w.Code)
		}
	}
	if st := m.Stats(); st.Errors != n || st.Admitted != n {
		t.Fatalf("%d requests, each undecided by the store; stats %+v, want Errors %d, Admitted %d", n, st, n, n)
	}
	// Only the in-flight limits fail: the rates are decided.
	m = newMiddleware(t, Global(Limit{Limiter: newLimiter(t, mem, rate.Limiter.Policy()), Key: rate.Key}),
		InFlight("", InFlightLimit{InFlight: busy}, InFlightLimit{InFlight: perKey, Key: Header("X-API-Key")}))
	send(m.Handler(okHandler), "GET", "/", "192.0.2.1:1", "X-API-Key", "k1")
	if st := m.Stats(); st.Errors != 1 {
		t.Fatalf("a request two in-flight limits could not decide; stats %+v, want Errors 1", st)
	}
}

// inFlightRefusalAfterRate sends two requests of one client under an hourly
// rate limit and an in-flight limit of 1 for the client: the second comes
// while the first is in the handler. It returns the second's answer.
func inFlightRefusalAfterRate(t *testing.T) (*Middleware, *httptest.ResponseRecorder) {
	t.Helper()
	store, _ := newStore(t)
	f, err := inflight.New(store, "per-client", 1)
	if err != nil {
		t.Fatal(err)
	}
	rate := Limit{Limiter: newLimiter(t, store, sluice.Policy{Name: "hourly", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Hour}), Key: Header("X-Client")}
	m := newMiddleware(t, Global(rate), InFlight("", InFlightLimit{InFlight: f, Key: Header("X-Client")}))
	entered, block := make(chan struct{}), make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { entered <- struct{}{}; <-block }))
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptestRequest("192.0.2.1:1", "X-Client", "c"))
		close(done)
	}()
	<-entered
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptestRequest("192.0.2.1:1", "X-Client", "c"))
	close(block)
	<-done
	return m, w
}

// inFlightOnly returns a Middleware with one in-flight limit of 4 and no
// rate limit, its handler, and the count of requests that reached it.
func inFlightOnly(t *testing.T) (*Middleware, http.Handler, *int) {
	t.Helper()
	store, _ := newStore(t)
	f, err := inflight.New(store, "slots", 4)
	if err != nil {
		t.Fatal(err)
	}
	m := newMiddleware(t, InFlight("", InFlightLimit{InFlight: f}))
	reached := new(int)
	return m, m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { *reached++ })), reached
}

// TestWithoutResets drops the t parameters of a RateLimit list, and keeps
// a ";t=" inside a quoted policy name.
func TestWithoutResets(t *testing.T) {
	for in, want := range map[string]string{
		`"hourly";r=98;t=3600`:                   `"hourly";r=98`,
		`"a";r=1;t=5, "b;t=7\"x";r=0;t=12`:       `"a";r=1, "b;t=7\"x";r=0`,
		`"no reset";r=3`:                         `"no reset";r=3`,
		`"hourly";r=98;t=3600, "per-client";r=0`: `"hourly";r=98, "per-client";r=0`,
	} {
		if got := withoutResets(in); got != want {
			t.Errorf("withoutResets(%s) = %s, want %s", in, got, want)
		}
	}
}
