// SPDX-License-Identifier: Apache-2.0

package httplimit_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/pace"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestInFlight: a route-wide in-flight limit answers 503 when full, a
// per-client one 429, both with Retry-After and a RateLimit-Policy item in
// concurrent-requests; slots come back when handlers return; a critical
// request may use the reserve.
func TestInFlight(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	route, err := inflight.New(store, "reports", 4, inflight.WithReserve(0.25))
	if err != nil {
		t.Fatal(err)
	}
	perClient, err := inflight.New(store, "per-client", 2)
	if err != nil {
		t.Fatal(err)
	}
	trusted := func(r *http.Request) bool { return r.Header.Get("X-Trusted") == "yes" }
	m, err := httplimit.New(httplimit.InFlight("GET /reports", httplimit.InFlightLimit{InFlight: route}),
		httplimit.InFlight("GET /mine", httplimit.InFlightLimit{InFlight: perClient, Key: httplimit.Header("X-Client")}),
		httplimit.WithCriticalFunc(httplimit.CriticalFrom(trusted)))
	if err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	entered := make(chan struct{}, 16)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-block
	}))
	serve := func(path string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	done := make(chan *httptest.ResponseRecorder, 16)
	for range 3 { // 3 = 4 − ⌊4·0.25⌋ non-critical slots
		go func() { done <- serve("/reports") }()
		<-entered
	}
	w := serve("/reports")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("4th non-critical request: %d Retry-After %q, want 503 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	// q is what a non-critical request may hold: 4 less the reserve.
	if got, want := w.Header().Get("RateLimit-Policy"), `"reports";q=3;qu="concurrent-requests"`; got != want {
		t.Fatalf("RateLimit-Policy %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"reports";r=0;t=1`; got != want {
		t.Fatalf("RateLimit %q, want %q", got, want)
	}
	if w := serve("/reports", httplimit.CriticalHeader, "critical"); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("a critical claim the trust function does not vouch for: %d, want 503", w.Code)
	}
	go func() { done <- serve("/reports", httplimit.CriticalHeader, "critical", "X-Trusted", "yes") }()
	<-entered // the critical one takes the reserve
	if w := serve("/reports", httplimit.CriticalHeader, "critical", "X-Trusted", "yes"); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("5th request (critical, beyond the limit): %d, want 503", w.Code)
	}
	for range 2 {
		go func() { done <- serve("/mine", "X-Client", "a") }()
		<-entered
	}
	if w := serve("/mine", "X-Client", "a"); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("3rd request of client a: %d, want 429 with Retry-After", w.Code)
	}
	go func() { done <- serve("/mine", "X-Client", "b") }()
	<-entered
	close(block)
	entered = make(chan struct{}, 16)
	for range 7 {
		if w := <-done; w.Code != http.StatusOK {
			t.Fatalf("admitted request answered %d", w.Code)
		}
	}
	store.Sweep()
	if n := store.Semaphores(); n != 0 {
		t.Fatalf("%d semaphores held after every request finished", n)
	}
	for range 10 { // released slots are free again
		if w := serve("/reports"); w.Code != http.StatusOK {
			t.Fatalf("sequential request answered %d", w.Code)
		}
	}
	if st := m.Stats(); st.Refused != 4 || st.Unavailable != 0 || st.Errors != 0 {
		t.Fatalf("stats %+v, want 4 refused (one 429, three 503 of a busy server), none unavailable (the store did not fail)", st)
	}
	if !strings.Contains(w.Body.String(), "reports") {
		t.Fatalf("503 body %q does not name the limit", w.Body.String())
	}
}

// TestInFlightLocalRefusal: while the store fails, a per-client in-flight
// limit that fails local refuses a client over its local share as it
// would over the limit (429, counted as refused), not as a limit that
// fails closed (503).
func TestInFlightLocalRefusal(t *testing.T) {
	failing := unreachable{} // every call fails: the store is unreachable (a closed one never admits)
	local := memstore.New()
	defer local.Close()
	perClient, err := inflight.New(failing, "per-client", 2,
		inflight.WithFailureMode(sluice.FailLocal), inflight.WithLocal(local, sluice.FixedReplicas(2)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.InFlight("GET /mine", httplimit.InFlightLimit{InFlight: perClient, Key: httplimit.Header("X-Client")}))
	if err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	entered := make(chan struct{}, 1)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-block
	}))
	serve := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/mine", nil)
		req.Header.Set("X-Client", "a")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- serve() }() // takes the local share, ⌊2/2⌋ = 1
	<-entered
	if w := serve(); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Errorf("over the local share: %d Retry-After %q, want 429 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	close(block)
	if w := <-done; w.Code != http.StatusOK {
		t.Errorf("within the local share: %d, want 200", w.Code)
	}
	if st := m.Stats(); st.Refused != 1 || st.Unavailable != 0 || st.Errors != 2 {
		t.Errorf("Stats() = %+v, want 1 refused, 0 unavailable, 2 errors", st)
	}
}

// TestInFlightClosedStore: over a closed store an in-flight limit cannot
// decide, whatever its failure mode: 503 saying the store is closed (not
// that the limit "fails closed" when it fails open, nor, when it fails
// local, that the server has too many requests in flight), counted as
// unavailable, never as refused.
func TestInFlightClosedStore(t *testing.T) {
	for _, mode := range []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed, sluice.FailLocal} {
		store, local := memstore.New(), memstore.New()
		defer local.Close()
		f, err := inflight.New(store, "busy", 2, inflight.WithFailureMode(mode), inflight.WithLocal(local, nil))
		if err != nil {
			t.Fatal(err)
		}
		store.Close()
		m, err := httplimit.New(httplimit.InFlight("", httplimit.InFlightLimit{InFlight: f}))
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if body, want := w.Body.String(), `"detail":"The in-flight limit \"busy\" cannot decide: its store is closed."`; w.Code != http.StatusServiceUnavailable || !strings.Contains(body, want) {
			t.Errorf("%v: %d %s; want 503 with %s", mode, w.Code, body, want)
		}
		if st := m.Stats(); st.Unavailable != 1 || st.Refused != 0 || st.Admitted != 0 {
			t.Errorf("%v: stats %+v, want 1 unavailable, none refused or admitted", mode, st)
		}
	}
}

// TestCriticalNeedsTrust: without WithCriticalFunc, a request that claims
// the reserve with the header gets no more than any other (defect 10: it
// took the reserve).
func TestCriticalNeedsTrust(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	route, err := inflight.New(store, "reports", 4, inflight.WithReserve(0.25))
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.InFlight("", httplimit.InFlightLimit{InFlight: route}))
	if err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	entered := make(chan struct{}, 4)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-block
		}
	}))
	done := make(chan int, 3)
	for range 3 { // the 3 slots open to every request
		go func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/hold", nil))
			done <- w.Code
		}()
		<-entered
	}
	req := httptest.NewRequest("GET", "/now", nil)
	req.Header.Set(httplimit.CriticalHeader, "critical")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	close(block)
	for range 3 {
		<-done
	}
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("an untrusted critical claim: %d, want 503 (the reserve is granted only by WithCriticalFunc)", w.Code)
	}
}

// TestInFlightRouteRedirectedPath: a request the ServeMux would redirect
// to a cleaned path ("/reports//1", "/x/../reports/1") faces the in-flight
// limits of the route it is redirected to, as it faces that route's rate
// limits: while "/reports/1" holds the route's only slot, each is refused
// with 503 and never reaches the handler (the application's router, which
// need not redirect, would have run two reports at once).
func TestInFlightRouteRedirectedPath(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	f, err := inflight.New(store, "reports", 1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.InFlight("GET /reports/{id}", httplimit.InFlightLimit{InFlight: f}))
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/reports//1", "/x/../reports/1", "/reports/./1"}
	codes := map[string]int{}
	var ran []string
	var h http.Handler
	h = m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = append(ran, r.URL.Path)
		if r.URL.Path != "/reports/1" {
			return
		}
		for _, p := range paths { // while /reports/1 holds the slot
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
			codes[p] = w.Code
		}
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/reports/1", nil))
	for _, p := range paths {
		if codes[p] != http.StatusServiceUnavailable {
			t.Errorf("GET %s while /reports/1 holds the only slot: %d, want 503", p, codes[p])
		}
	}
	if len(ran) != 1 {
		t.Errorf("the handler ran for %q, want only /reports/1 (limit 1)", ran)
	}
}

// TestInFlightRemainingHonoursReserve: the r of an in-flight limit's
// RateLimit item counts the slots left to a request like the one admitted,
// against the limit enforced for it. With a limit of 2 and a reserve of
// ⌊2·0.5⌋ = 1, a non-critical request takes the one slot open to it, so
// its r is 0 (not 1: the next non-critical request is refused); a critical
// one, which may use the reserve, is told r=1.
func TestInFlightRemainingHonoursReserve(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	f, err := inflight.New(store, "reports", 2, inflight.WithReserve(0.5))
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.InFlight("", httplimit.InFlightLimit{InFlight: f}),
		httplimit.WithCriticalFunc(httplimit.CriticalFrom(func(*http.Request) bool { return true })))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		critical bool
		want     string
	}{{false, `"reports";r=0`}, {true, `"reports";r=1`}} {
		var state string
		nextCode := 0
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/first" {
				return
			}
			state = w.Header().Get("RateLimit")
			// While this request holds its slot, a non-critical one.
			w2 := httptest.NewRecorder()
			m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w2, httptest.NewRequest("GET", "/next", nil))
			nextCode = w2.Code
		}))
		req := httptest.NewRequest("GET", "/first", nil)
		if tc.critical {
			req.Header.Set(httplimit.CriticalHeader, "critical")
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if state != tc.want {
			t.Errorf("admitted request (critical %v): RateLimit %q, want %q", tc.critical, state, tc.want)
		}
		if want := http.StatusServiceUnavailable; nextCode != want {
			t.Errorf("a non-critical request while the first (critical %v) holds a slot: %d, want %d (the reserve is kept)", tc.critical, nextCode, want)
		}
	}
}

// TestInFlightAdvertisesOpenSlots: the RateLimit fields of an in-flight
// limit describe the slots open to the request they answer. With a limit
// of 4 and a reserve of half, a request that is not critical may hold 2
// (LimitFor(false)): alone in flight it reads q=2 and r=1, and a critical
// one (vouched for by WithCriticalFunc) q=4 and r=3. So a lone client that
// paces itself from them (package pace) keeps at most 2 requests in flight
// and is never refused; told q=4, it sent 4 and had 2 refused with 503
// though no other client was there.
func TestInFlightAdvertisesOpenSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithSweepInterval(0))
		defer store.Close()
		f, err := inflight.New(store, "conc", 4, inflight.WithReserve(0.5))
		if err != nil {
			t.Fatal(err)
		}
		trusted := func(r *http.Request) bool { return r.Header.Get("X-Trusted") == "yes" }
		m, err := httplimit.New(httplimit.InFlight("", httplimit.InFlightLimit{InFlight: f}),
			httplimit.WithCriticalFunc(httplimit.CriticalFrom(trusted)))
		if err != nil {
			t.Fatal(err)
		}
		entered, release := make(chan struct{}, 4), make(chan struct{})
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				entered <- struct{}{}
				<-release
			}
		}))
		for _, c := range []struct {
			hdr          []string
			policy, left string
		}{
			{nil, `"conc";q=2;qu="concurrent-requests"`, `"conc";r=1`},
			{[]string{httplimit.CriticalHeader, "critical", "X-Trusted", "yes"}, `"conc";q=4;qu="concurrent-requests"`, `"conc";r=3`},
		} {
			req := httptest.NewRequest("GET", "/", nil)
			for i := 0; i+1 < len(c.hdr); i += 2 {
				req.Header.Set(c.hdr[i], c.hdr[i+1])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if got := w.Header().Get("RateLimit-Policy"); got != c.policy {
				t.Errorf("alone in flight, %v: RateLimit-Policy %q, want %q", c.hdr, got, c.policy)
			}
			if got := w.Header().Get("RateLimit"); got != c.left {
				t.Errorf("alone in flight, %v: RateLimit %q, want %q", c.hdr, got, c.left)
			}
		}

		// A lone pace client sends 4 requests at once, which the handler
		// holds.
		c := &http.Client{Transport: pace.New(inProcess{h})}
		if resp, err := c.Get("http://api.example/"); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		codes := make(chan int, 4)
		for range 4 {
			go func() {
				resp, err := c.Get("http://api.example/hold")
				if err != nil {
					codes <- -1
					return
				}
				resp.Body.Close()
				codes <- resp.StatusCode
			}()
		}
		synctest.Wait()
		if len(entered) != 2 || len(codes) != 0 {
			t.Errorf("a lone pace client: %d requests in the handler and %d answered before any finished; want 2 and none (q=2)", len(entered), len(codes))
		}
		close(release)
		for range 4 {
			if code := <-codes; code != http.StatusOK {
				t.Errorf("a lone pace client's request answered %d, want 200", code)
			}
		}
	})
}

// inProcess is an http.RoundTripper that serves requests with a handler in
// process.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	sr := req.Clone(req.Context())
	sr.RequestURI = req.URL.RequestURI()
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, sr)
	return w.Result(), nil
}

// TestInFlightKeepsWriterInterfaces: behind an in-flight limit the
// handler's writer is an http.Flusher and an http.Hijacker exactly when
// the server's writer is (a streaming handler asks w.(http.Flusher), a
// WebSocket upgrade w.(http.Hijacker)), and Flush and Hijack reach the
// server's writer.
func TestInFlightKeepsWriterInterfaces(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	f, err := inflight.New(store, "stream", 2)
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.InFlight("", httplimit.InFlightLimit{InFlight: f}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		w      http.ResponseWriter
		fl, hj bool
	}{
		{"plain", plainWriter{httptest.NewRecorder()}, false, false},
		{"flusher", httptest.NewRecorder(), true, false},
		{"hijacker", &hijackWriter{ResponseWriter: httptest.NewRecorder()}, false, true},
		{"both", &flushHijackWriter{hijackWriter{ResponseWriter: httptest.NewRecorder()}}, true, true},
	} {
		var fl, hj bool
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var f http.Flusher
			f, fl = w.(http.Flusher)
			if fl {
				f.Flush()
			}
			var j http.Hijacker
			j, hj = w.(http.Hijacker)
			if hj {
				j.Hijack()
			}
		}))
		h.ServeHTTP(tc.w, httptest.NewRequest("GET", "/events", nil))
		if fl != tc.fl || hj != tc.hj {
			t.Errorf("%s writer: the handler's is a Flusher %v, a Hijacker %v; want %v, %v (as the server's)", tc.name, fl, hj, tc.fl, tc.hj)
		}
		if rec, ok := tc.w.(*httptest.ResponseRecorder); ok && tc.fl && !rec.Flushed {
			t.Errorf("%s writer: the handler's Flush did not reach it", tc.name)
		}
		if hw, ok := tc.w.(*hijackWriter); ok && !hw.hijacked {
			t.Errorf("%s writer: the handler's Hijack did not reach it", tc.name)
		}
		if hw, ok := tc.w.(*flushHijackWriter); ok && (!hw.hijacked || !hw.ResponseWriter.(*httptest.ResponseRecorder).Flushed) {
			t.Errorf("%s writer: the handler's Flush or Hijack did not reach it", tc.name)
		}
	}
}

// plainWriter is a ResponseWriter with no optional interface.
type plainWriter struct{ rec *httptest.ResponseRecorder }

func (w plainWriter) Header() http.Header         { return w.rec.Header() }
func (w plainWriter) Write(b []byte) (int, error) { return w.rec.Write(b) }
func (w plainWriter) WriteHeader(code int)        { w.rec.WriteHeader(code) }

// hijackWriter is a ResponseWriter that is an http.Hijacker and no
// http.Flusher.
type hijackWriter struct {
	http.ResponseWriter // only its ResponseWriter methods are promoted
	hijacked            bool
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return nil, nil, errors.New("no connection")
}

// flushHijackWriter is a ResponseWriter that is both.
type flushHijackWriter struct{ hijackWriter }

func (w *flushHijackWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

var errUnreachable = errors.New("dial tcp: connection refused")

// unreachable is an in-flight store (inflight.Semaphore) whose every call
// fails, as an unreachable Redis does.
type unreachable struct{}

func (unreachable) Acquire(context.Context, string, string, string, int64, time.Duration) (inflight.Slots, error) {
	return inflight.Slots{}, errUnreachable
}

func (unreachable) Release(context.Context, string, string, string) (inflight.Slots, error) {
	return inflight.Slots{}, errUnreachable
}

func (unreachable) Extend(context.Context, string, string, string, time.Duration) (inflight.Slots, error) {
	return inflight.Slots{}, errUnreachable
}
