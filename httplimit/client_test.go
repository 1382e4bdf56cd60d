// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/sluicetest"
)

// handlerTransport is an http.RoundTripper that serves requests with a
// handler in process, as if from remote, stamping each with the manual
// clock's time.
type handlerTransport struct {
	h      http.Handler
	remote string
}

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	sr := req.Clone(req.Context())
	sr.RemoteAddr = t.remote
	sr.RequestURI = req.URL.RequestURI()
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, sr)
	return w.Result(), nil
}

// honestClient retries 429 and 503 answers after exactly the Retry-After
// they carry, sleeping on the manual clock. It records every attempt.
type honestClient struct {
	c        *http.Client
	clock    *sluicetest.Clock
	attempts []attempt
}

type attempt struct {
	at       time.Time
	notEarly time.Time // the earliest time the server allowed
	code     int
}

func (c *honestClient) get(url string, hdr ...string) (int, error) {
	notEarly := c.clock.Now()
	for try := 0; try < 100; try++ {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			return 0, err
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		now := c.clock.Now()
		resp, err := c.c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		c.attempts = append(c.attempts, attempt{now, notEarly, resp.StatusCode})
		if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
			return resp.StatusCode, nil
		}
		secs, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
		if err != nil || secs < 0 {
			return 0, fmt.Errorf("status %d with Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		wait := time.Duration(secs) * time.Second
		notEarly = c.clock.Now().Add(wait)
		c.clock.Advance(wait)
	}
	return 0, fmt.Errorf("%s: gave up after 100 attempts", url)
}

// A client that honours Retry-After gets all its work done, and every retry
// it makes when told succeeds: no Retry-After was ever too early.
func TestHonestClientFinishes(t *testing.T) {
	store, clock := newStore(t)
	ip, _ := clientip.New()
	// 2 per 3 s with a burst of 3 (1.5 s between tokens, never a whole
	// second), and a per-key sliding window of 10 per 20 s.
	perIP := newLimiter(t, store, sluice.Policy{Name: "per-ip", Algorithm: sluice.TokenBucket, Limit: 2, Period: 3 * time.Second, Burst: 3})
	perKey := newLimiter(t, store, sluice.Policy{Name: "per-key", Algorithm: sluice.SlidingWindow, Limit: 10, Period: 20 * time.Second})
	m := newMiddleware(t,
		WithRetryJitter(700*time.Millisecond),
		Route("GET /jobs/{id}", 1, Limit{Limiter: perIP, Key: ip.Key}, Limit{Limiter: perKey, Key: Header("X-API-Key")}),
	)
	c := &honestClient{c: &http.Client{Transport: handlerTransport{m.Handler(okHandler), "192.0.2.1:5000"}}, clock: clock}
	const jobs = 40
	for i := range jobs {
		// A little work between requests, on the same clock.
		clock.Advance(time.Duration(i%3) * 100 * time.Millisecond)
		code, err := c.get(fmt.Sprintf("http://api.example/jobs/%d", i), "X-API-Key", "k1")
		if err != nil || code != 200 {
			t.Fatalf("job %d: %d, %v", i, code, err)
		}
	}
	refused := 0
	for i, a := range c.attempts {
		if a.at.Before(a.notEarly) {
			t.Fatalf("attempt %d at %v, before the allowed %v", i, a.at.Sub(t0), a.notEarly.Sub(t0))
		}
		if a.code != 200 {
			refused++
			if i+1 < len(c.attempts) && c.attempts[i+1].code != 200 {
				t.Fatalf("attempts %d and %d both refused: the Retry-After of %d was too early", i, i+1, i)
			}
		}
	}
	if refused == 0 {
		t.Fatal("no request was ever refused: the test limits nothing")
	}
	// The per-IP bucket alone admits 3 at once and then one per 1.5 s: 40
	// requests cannot finish before 37 × 1.5 s.
	if elapsed := clock.Now().Sub(t0); elapsed < 55500*time.Millisecond {
		t.Errorf("done after %v: the limits did not hold", elapsed)
	}
	t.Logf("%d jobs, %d refusals, %v", jobs, refused, clock.Now().Sub(t0))
}
