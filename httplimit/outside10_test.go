// SPDX-License-Identifier: Apache-2.0

package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestOutside10InFlightRemainingHonoursReserve: the RateLimit header's r is
// "remaining units" (package doc, # Responses). For a non-critical request
// of a limit of 2 with a reserve of ⌊2·0.5⌋ = 1, the one slot open to it is
// taken once it is admitted, so r must be 0: the next non-critical request
// is refused. A client (package pace, say) that believes r=1 is refused.
func TestOutside10InFlightRemainingHonoursReserve(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	f, err := inflight.New(store, "reports", 2, inflight.WithReserve(0.5))
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.InFlight("", httplimit.InFlightLimit{InFlight: f}))
	if err != nil {
		t.Fatal(err)
	}
	var inner *httptest.ResponseRecorder
	var state string
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		state = w.Header().Get("RateLimit")
		// While this request holds the only non-critical slot, a second
		// non-critical request is refused.
		inner = httptest.NewRecorder()
		m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(inner, httptest.NewRequest("GET", "/", nil))
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if inner.Code != http.StatusServiceUnavailable {
		t.Fatalf("second non-critical request: %d, want 503 (the reserve is kept)", inner.Code)
	}
	if want := `"reports";r=0`; state != want {
		t.Fatalf("admitted non-critical request: RateLimit %q, want %q: it said a slot remained, and the next request was refused", state, want)
	}
}

// TestOutside10InFlightKeepsFlusher: a streaming handler (server-sent
// events: the long-lived work in-flight limits are for) asks its writer for
// http.Flusher. Behind httplimit.InFlight the writer is wrapped and no
// longer is one, although the same handler behind the middleware without
// an in-flight limit gets a Flusher.
func TestOutside10InFlightKeepsFlusher(t *testing.T) {
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
	var flusher bool
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, flusher = w.(http.Flusher)
	}))
	w := httptest.NewRecorder() // a Flusher
	h.ServeHTTP(w, httptest.NewRequest("GET", "/events", nil))
	if !flusher {
		t.Fatal("behind an in-flight limit the handler's writer is not an http.Flusher (the server's is): streaming handlers cannot flush")
	}
}
