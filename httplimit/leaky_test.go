// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/memstore"
)

// Leaky-bucket requests are held for their queue delay, up to the maximum;
// one that would wait longer is refused and takes no place in the queue.
func TestLeakyBucketDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithClock(clock.Monotonic()), memstore.WithSweepInterval(0))
		defer store.Close()
		ip, _ := clientip.New()
		// A queue of 5 draining 1 per second.
		lim := newLimiter(t, store, sluice.Policy{Name: "ingest", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 5})
		start := time.Now()
		var mu sync.Mutex
		var ran []time.Duration
		app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			ran = append(ran, time.Since(start))
			mu.Unlock()
		})
		m := newMiddleware(t, WithMaxDelay(2*time.Second), Global(Limit{Limiter: lim, Key: ip.Key}))
		h := m.Handler(app)

		codes := make([]*httptest.ResponseRecorder, 5)
		launch := func(i int) {
			go func() { codes[i] = send(h, "POST", "/", "192.0.2.1:1") }()
			synctest.Wait() // decided, and held or answered
		}
		for i := range 4 { // delays 0, 1 s, 2 s, and 3 s (too long)
			launch(i)
		}
		if codes[3] == nil || codes[3].Code != 429 {
			t.Fatalf("4th request (a 3 s delay, more than 2 s): %v; want 429", codes[3])
		}
		if ra := retryAfter(t, codes[3]); ra != time.Second {
			t.Errorf("Retry-After %v; want 1s (3 s delay − 2 s max)", ra)
		}
		time.Sleep(time.Second)
		// One second later the queue is 2 s long: had the refused request
		// taken a place it would be 3 s, and this one refused.
		launch(4)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for _, i := range []int{0, 1, 2, 4} {
			if codes[i] == nil || codes[i].Code != 200 {
				t.Fatalf("request %d: %v; want 200", i, codes[i])
			}
		}
		want := []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}
		if !slices.Equal(ran, want) {
			t.Errorf("handler ran at %v; want %v", ran, want)
		}
		if st := m.Stats(); st.Delayed != 3 || st.Refused != 1 || st.Admitted != 4 {
			t.Errorf("stats %+v", st)
		}
	})
}

// A held request whose client goes away never reaches the handler.
func TestLeakyBucketCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithClock(clock.Monotonic()), memstore.WithSweepInterval(0))
		defer store.Close()
		ip, _ := clientip.New()
		lim := newLimiter(t, store, sluice.Policy{Name: "ingest", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 5})
		calls := 0
		h := newMiddleware(t, Global(Limit{Limiter: lim, Key: ip.Key})).Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ }))
		send(h, "GET", "/", "192.0.2.1:1")
		r := httptestRequest("192.0.2.1:1")
		ctx, cancel := contextWithCancel(r)
		done := make(chan struct{})
		go func() {
			h.ServeHTTP(httptest.NewRecorder(), r.WithContext(ctx))
			close(done)
		}()
		synctest.Wait()
		cancel()
		<-done
		if calls != 1 {
			t.Errorf("handler called %d times; want once (the cancelled request never)", calls)
		}
	})
}

// TestLeakyRefusalAdvertisesNoneLeft: a request refused because its queue
// delay would pass WithMaxDelay (here the default, 10 s, on a queue of 30
// draining 1 per second) says that nothing remains under the policy it
// names as violated (r=0, and t the seconds until a request fits again),
// not the queue's free places, none of which a request can take: the
// RateLimit r is what is left after the request (package pace's guarantee).
func TestLeakyRefusalAdvertisesNoneLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithClock(clock.Monotonic()), memstore.WithSweepInterval(0))
		defer store.Close()
		lim := newLimiter(t, store, sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30})
		m := newMiddleware(t, Global(Limit{Limiter: lim, Key: Header("X-API-Key")}))
		h := m.Handler(okHandler)
		for range 11 { // delays 0 to 10 s: held
			go send(h, "GET", "/", "192.0.2.1:1", "X-API-Key", "k1")
			synctest.Wait()
		}
		w := send(h, "GET", "/", "192.0.2.1:1", "X-API-Key", "k1") // 11 s: refused
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("a request whose delay passes 10 s: %d, want 429", w.Code)
		}
		if got, want := w.Header().Get("RateLimit"), `"lb";r=0;t=1`; got != want {
			t.Errorf("429 naming %v as violated: RateLimit %q, want %q", problemOf(t, w).Violated, got, want)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
	})
}

// TestLeakyConcurrentNeverPastMaxDelay: requests arriving together on a
// leaky-bucket route are never held past WithMaxDelay (here the default,
// 10 s, on a queue of 30 draining 1 per second): the bound is part of the
// one store call that admits them, so concurrent requests cannot all pass
// it before any of them takes its place. 12 requests at once: 11 are held
// for 0 to 10 s, the 12th is refused. (With a peek at the queue before the
// take, some runs held a request 11 s.)
func TestLeakyConcurrentNeverPastMaxDelay(t *testing.T) {
	for run := range 200 {
		synctest.Test(t, func(t *testing.T) {
			store := memstore.New(memstore.WithClock(clock.Monotonic()), memstore.WithSweepInterval(0))
			defer store.Close()
			lim := newLimiter(t, store, sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30})
			start := time.Now()
			var mu sync.Mutex
			var longest time.Duration
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				longest = max(longest, time.Since(start))
				mu.Unlock()
			})
			h := newMiddleware(t, Global(Limit{Limiter: lim, Key: Header("X-API-Key")})).Handler(app)
			codes := make([]int, 12)
			var wg sync.WaitGroup
			for i := range codes {
				wg.Go(func() { codes[i] = send(h, "GET", "/", "192.0.2.1:1", "X-API-Key", "k").Code })
			}
			wg.Wait()
			if longest > DefaultMaxDelay {
				t.Fatalf("run %d: a request was held %v, past the maximum %v (codes %v)", run, longest, DefaultMaxDelay, codes)
			}
			ok := 0
			for _, c := range codes {
				if c == http.StatusOK {
					ok++
				}
			}
			if ok != 11 {
				t.Fatalf("run %d: %d requests admitted, want 11 (delays 0 to 10 s); codes %v", run, ok, codes)
			}
		})
	}
}

// TestLeakyAdmissionAdvertisesWhatFits: an admitted request on a queue of
// 30 draining 1 per second, with the default maximum delay of 10 s, says
// that 10 more fit (delays 1 to 10 s), not the queue's 29 free places, 19
// of which no request may take: r is what is left (package pace's
// guarantee), and RateLimit-Policy's q is the 11 a request may find when
// the key is idle.
func TestLeakyAdmissionAdvertisesWhatFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithClock(clock.Monotonic()), memstore.WithSweepInterval(0))
		defer store.Close()
		lim := newLimiter(t, store, sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30})
		h := newMiddleware(t, Global(Limit{Limiter: lim, Key: Header("X-API-Key")})).Handler(okHandler)
		w := send(h, "GET", "/", "192.0.2.1:1", "X-API-Key", "k")
		if got, want := w.Header().Get("RateLimit"), `"lb";r=10;t=1`; got != want {
			t.Errorf("first admission: RateLimit %q, want %q", got, want)
		}
		if got, want := w.Header().Get("RateLimit-Policy"), `"lb";q=11;w=11`; got != want {
			t.Errorf("RateLimit-Policy %q, want %q", got, want)
		}
		held := make([]*httptest.ResponseRecorder, 10)
		for i := range held { // delays 1 to 10 s
			go func() { held[i] = send(h, "GET", "/", "192.0.2.1:1", "X-API-Key", "k") }()
			synctest.Wait()
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got, want := held[9].Header().Get("RateLimit"), `"lb";r=0;t=11`; held[9].Code != 200 || got != want {
			t.Errorf("the admission held 10 s: %d, RateLimit %q; want 200, %q", held[9].Code, got, want)
		}
	})
}

// An enforced leaky-bucket limit whose Limiter's policy has no Name is
// refused by New, naming it: the maximum delay is decided on the state of
// a named policy, which Limit.Name (a header name) does not give it.
func TestLeakyUnnamedRefused(t *testing.T) {
	store, _ := newStore(t)
	lim := newLimiter(t, store, sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30})
	_, err := New(Global(Limit{Limiter: lim, Key: Header("X-API-Key"), Name: "queue"}))
	if err == nil || !strings.Contains(err.Error(), "Global limit 0: policy leaky-bucket 1/1s burst 30 has no Name") {
		t.Fatalf("New: %v; want an error naming the unnamed leaky bucket", err)
	}
}
