// SPDX-License-Identifier: Apache-2.0

package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

// samples is a Controller that counts what it observes.
type samples struct {
	mu sync.Mutex
	n  int
}

func (c *samples) Limit() int64 { return 100 }
func (c *samples) Observe(inflight.Sample) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}
func (c *samples) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestInFlightRefusedNotObserved: a request that took a slot of an adaptive
// limit and was then refused by another in-flight limit never ran, so the
// adaptive limit's Controller learns nothing from it; a request that ran
// is observed once.
func TestInFlightRefusedNotObserved(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	ctrl := &samples{}
	adaptive, err := inflight.New(store, "adaptive", 0, inflight.WithController(ctrl))
	if err != nil {
		t.Fatal(err)
	}
	perClient, err := inflight.New(store, "per-client", 1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.InFlight("", httplimit.InFlightLimit{InFlight: adaptive}),
		httplimit.InFlight("GET /", httplimit.InFlightLimit{InFlight: perClient, Key: httplimit.Header("X-Client")}))
	if err != nil {
		t.Fatal(err)
	}
	entered, block := make(chan struct{}), make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-block
	}))
	serve := func() int {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Client", "greedy")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	first := make(chan int, 1)
	go func() { first <- serve() }()
	<-entered
	for range 5 {
		if code := serve(); code != http.StatusTooManyRequests {
			t.Fatalf("a second request of the client: %d, want 429", code)
		}
	}
	if n := ctrl.count(); n != 0 {
		t.Fatalf("the Controller observed %d refused requests, want none", n)
	}
	close(block)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the first request: %d", code)
	}
	if n := ctrl.count(); n != 1 {
		t.Fatalf("the Controller observed %d requests, want the 1 that ran", n)
	}
}

// TestInFlightHeldAfterClientGone: a request's slot is held until its
// handler returns, even when the client has gone (its context cancelled)
// and the handler runs past the slot's TTL.
func TestInFlightHeldAfterClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithSweepInterval(0))
		defer store.Close()
		slow, err := inflight.New(store, "slow", 1, inflight.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		m, err := httplimit.New(httplimit.InFlight("", httplimit.InFlightLimit{InFlight: slow}))
		if err != nil {
			t.Fatal(err)
		}
		entered, block := make(chan struct{}, 1), make(chan struct{})
		unblock := sync.OnceFunc(func() { close(block) })
		defer unblock() // on failure too
		var calls atomic.Int32
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			if calls.Add(1) == 1 {
				entered <- struct{}{}
				<-block // ignores its context, as much work does
			}
		}))
		serve := func(ctx context.Context) int {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
			return w.Code
		}
		ctx, cancel := context.WithCancel(context.Background())
		first := make(chan int, 1)
		go func() { first <- serve(ctx) }()
		<-entered
		cancel()                // the client goes
		time.Sleep(time.Minute) // twenty TTLs
		if code := serve(context.Background()); code != http.StatusServiceUnavailable {
			t.Fatalf("a second request while the first handler runs: %d, want 503", code)
		}
		unblock()
		if code := <-first; code != http.StatusOK {
			t.Fatalf("the first request: %d", code)
		}
		if code := serve(context.Background()); code != http.StatusOK {
			t.Fatalf("a request after the first returned: %d, want 200", code)
		}
	})
}
