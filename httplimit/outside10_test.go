// SPDX-License-Identifier: Apache-2.0

package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

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
