// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/memstore"
)

// go-retryablehttp, a widely used client that honours Retry-After on 429,
// finishes 40 jobs against the limited handler. The bubble's fake clock
// drives the store and the client's sleeps alike; the server logs every
// attempt, and shows that no retry came earlier than told and that every
// retry made when told was admitted.
func TestRetryableHTTPClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithClock(clock.Monotonic()), memstore.WithSweepInterval(0))
		defer store.Close()
		ip, _ := clientip.New()
		perIP := newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.TokenBucket, Limit: 2, Period: 3 * time.Second, Burst: 3})
		perKey := newLimiter(t, store, sluice.Policy{Name: "per-key", Algorithm: sluice.SlidingWindow, Limit: 10, Period: 20 * time.Second})
		m := newMiddleware(t, WithRetryJitter(700*time.Millisecond),
			Route("GET /jobs/{id}", 1, Limit{Limiter: perIP, Key: ip.Key}, Limit{Limiter: perKey, Key: Header("X-API-Key")}))

		type entry struct {
			at         time.Time
			path       string
			code       int
			retryAfter time.Duration
		}
		var mu sync.Mutex
		var log []entry
		limited := m.Handler(okHandler)
		logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := newRecorder()
			limited.ServeHTTP(rec, r)
			ra, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
			mu.Lock()
			log = append(log, entry{time.Now(), r.URL.Path, rec.Code, time.Duration(ra) * time.Second})
			mu.Unlock()
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		})

		client := retryablehttp.NewClient()
		client.HTTPClient = &http.Client{Transport: handlerTransport{logged, "192.0.2.1:5000"}}
		client.RetryMax = 50
		client.Logger = nil
		start := time.Now()
		const jobs = 40
		for i := range jobs {
			req, err := retryablehttp.NewRequest("GET", fmt.Sprintf("http://api.example/jobs/%d", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-API-Key", "k1")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("job %d: %v", i, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("job %d: status %d", i, resp.StatusCode)
			}
		}
		refusals := 0
		for i, e := range log {
			if e.code == 200 {
				continue
			}
			refusals++
			if e.code != 429 || i+1 == len(log) {
				t.Fatalf("attempt %d: %+v", i, e)
			}
			next := log[i+1]
			if next.path != e.path {
				t.Fatalf("attempt %d: refused %s, but the client moved on to %s", i, e.path, next.path)
			}
			if waited := next.at.Sub(e.at); waited < e.retryAfter {
				t.Fatalf("attempt %d: retried after %v; Retry-After said %v", i, waited, e.retryAfter)
			}
			if next.code != 200 {
				t.Fatalf("attempt %d: the retry after Retry-After %v was refused too: it was too early", i, e.retryAfter)
			}
		}
		if refusals == 0 {
			t.Fatal("nothing was refused: the test limits nothing")
		}
		if elapsed := time.Since(start); elapsed < 55500*time.Millisecond {
			t.Errorf("done after %v: the limits did not hold", elapsed)
		}
		t.Logf("%d jobs, %d attempts, %d refusals, %v", jobs, len(log), refusals, time.Since(start))
	})
}
