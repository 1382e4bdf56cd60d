// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

var t0 = time.Unix(0, 0)

// newStore returns a memstore on a manual clock at t0, closed when the test
// ends.
func newStore(t testing.TB) (*memstore.Store, *sluicetest.Clock) {
	t.Helper()
	clock := sluicetest.NewClock(t0)
	store := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	t.Cleanup(func() { store.Close() })
	return store, clock
}

func newLimiter(t testing.TB, store sluice.Store, p sluice.Policy, opts ...sluice.Option) *sluice.Limiter {
	t.Helper()
	l, err := sluice.NewLimiter(store, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newMiddleware(t testing.TB, opts ...Option) *Middleware {
	t.Helper()
	m, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// okHandler answers 200 "ok".
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Write([]byte("ok"))
})

// send serves one request from remote through h; hdr holds header
// name/value pairs.
func send(h http.Handler, method, target, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// state is one RateLimit item.
type state struct {
	r, t int64
	hasT bool
}

// quotaItem is one RateLimit-Policy item.
type quotaItem struct{ q, w int64 }

// parseRateLimit parses the RateLimit and RateLimit-Policy fields of h
// strictly, checking every member is a String with the parameters the
// draft requires, and returns them by policy name.
func parseRateLimit(t *testing.T, h http.Header) (map[string]state, map[string]quotaItem) {
	t.Helper()
	states := map[string]state{}
	items, err := parseSFList(h.Values("RateLimit"))
	if err != nil {
		t.Fatalf("RateLimit %q: %v", h.Values("RateLimit"), err)
	}
	for _, it := range items {
		name, ok := it.value.(string)
		if !ok {
			t.Fatalf("RateLimit member %v is not a String", it.value)
		}
		r, ok := it.params[0].value.(int64)
		if it.params[0].key != "r" || !ok || r < 0 {
			t.Fatalf("RateLimit %q: first parameter %v is not r, a non-negative Integer", name, it.params[0])
		}
		s := state{r: r}
		if v, ok := it.param("t"); ok {
			if s.t, ok = v.(int64); !ok || s.t < 0 {
				t.Fatalf("RateLimit %q: t=%v is not a non-negative Integer", name, v)
			}
			s.hasT = true
		}
		if _, dup := states[name]; dup {
			t.Fatalf("RateLimit: policy %q twice", name)
		}
		states[name] = s
	}
	policies := map[string]quotaItem{}
	items, err = parseSFList(h.Values("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", h.Values("RateLimit-Policy"), err)
	}
	for _, it := range items {
		name, ok := it.value.(string)
		if !ok {
			t.Fatalf("RateLimit-Policy member %v is not a String", it.value)
		}
		qv, _ := it.param("q")
		wv, _ := it.param("w")
		q, ok1 := qv.(int64)
		w, ok2 := wv.(int64)
		if !ok1 || !ok2 || q < 0 || w < 1 {
			t.Fatalf("RateLimit-Policy %q: q=%v w=%v; want a non-negative q and a positive w", name, qv, wv)
		}
		policies[name] = quotaItem{q, w}
	}
	if len(policies) != len(states) {
		t.Fatalf("RateLimit-Policy names %v but RateLimit names %v", policies, states)
	}
	for name := range states {
		if _, ok := policies[name]; !ok {
			t.Fatalf("RateLimit names %q, RateLimit-Policy does not", name)
		}
	}
	return states, policies
}

// retryAfter parses the Retry-After of a response as delay-seconds.
func retryAfter(t *testing.T, w *httptest.ResponseRecorder) time.Duration {
	t.Helper()
	v := w.Header().Get("Retry-After")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		t.Fatalf("Retry-After %q is not delay-seconds", v)
	}
	return time.Duration(n) * time.Second
}

// problemOf decodes an RFC 9457 body.
func problemOf(t *testing.T, w *httptest.ResponseRecorder) problem {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q; want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	return p
}

func contextWithCancel(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithCancel(r.Context())
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
