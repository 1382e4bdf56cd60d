// SPDX-License-Identifier: Apache-2.0

package pace_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/pace"
)

// pipeNet is an in-memory network: a net.Listener whose connections are
// net.Pipe ends, and the dialer of the other ends. It lets a real
// http.Server and http.Transport talk inside a synctest bubble.
type pipeNet struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeNet() *pipeNet {
	return &pipeNet{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

func (p *pipeNet) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

func (p *pipeNet) Addr() net.Addr { return pipeAddr{} }

func (p *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-p.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "192.0.2.1:80" }

// limited is a real http.Server behind sluice's httplimit middleware,
// limiting every request under one key with p, on an in-memory network.
// The returned client's transport is a pace.Transport over a real
// http.Transport. served counts the requests that reached the middleware.
// Call it inside a synctest bubble: the memory store reads the bubble's
// clock.
func limited(t *testing.T, p sluice.Policy) (c *http.Client, lim *sluice.Limiter, served *atomic.Int64) {
	t.Helper()
	store := memstore.New()
	lim, err := sluice.NewLimiter(store, p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Global(httplimit.Limit{
		Limiter: lim,
		Key:     func(*http.Request) (string, bool) { return "client", true },
	}))
	if err != nil {
		t.Fatal(err)
	}
	served = new(atomic.Int64)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		h.ServeHTTP(w, r)
	})
	pn := newPipeNet()
	srv := &http.Server{Handler: count}
	go srv.Serve(pn)
	base := &http.Transport{DialContext: pn.dial, MaxIdleConnsPerHost: 64}
	t.Cleanup(func() {
		base.CloseIdleConnections()
		srv.Close()
		store.Close()
	})
	return &http.Client{Transport: pace.New(base)}, lim, served
}

// get sends a GET and returns the status, draining the body.
func get(ctx context.Context, c *http.Client) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://sluice.test/", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

var tenPerSecond = sluice.Policy{Name: "ten", Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second}

// The package's guarantee at the numbers: 1,000 requests against
// a 10 per second policy, from one goroutine and from 16 sharing the
// Transport, get no 429, and take 99 seconds: the first 10 at once, then 10
// per second, which is the least the policy allows (so the Transport did
// not pace by waiting needlessly).
func TestThousandRequests(t *testing.T) {
	for _, workers := range []int{1, 16} {
		t.Run("workers="+strconv.Itoa(workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _, served := limited(t, tenPerSecond)
				start := time.Now()
				var (
					next   atomic.Int64
					errs   = make(chan error, workers)
					wg     sync.WaitGroup
					counts [600]atomic.Int64
				)
				for range workers {
					wg.Go(func() {
						for next.Add(1) <= 1000 {
							code, err := get(t.Context(), c)
							if err != nil {
								errs <- err
								return
							}
							counts[code].Add(1)
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				if n := counts[http.StatusTooManyRequests].Load(); n != 0 {
					t.Errorf("%d requests refused with 429, want 0", n)
				}
				if n := counts[http.StatusOK].Load(); n != 1000 {
					t.Errorf("%d requests answered 200, want 1000", n)
				}
				if n := served.Load(); n != 1000 {
					t.Errorf("the server saw %d requests, want 1000", n)
				}
				if d := time.Since(start); d != 99*time.Second {
					t.Errorf("1,000 requests took %v, want 99s (10 at once, then 10 a second)", d)
				}
			})
		})
	}
}

// A request whose wait would pass its deadline fails at once, without
// being sent; one whose context is cancelled while it waits fails then.
func TestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, served := limited(t, tenPerSecond)
		for range 10 {
			if code, err := get(t.Context(), c); err != nil || code != 200 {
				t.Fatalf("get: %d, %v", code, err)
			}
		}
		// The bucket is empty and reported idle again in 1s.
		// A deadline at the reset leaves no time to send the request.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := get(ctx, c)
		if !errors.Is(err, pace.ErrDeadline) {
			t.Fatalf("get with a 1s deadline: %v, want ErrDeadline", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("ErrDeadline came after %v, want at once", d)
		}
		if n := served.Load(); n != 10 {
			t.Errorf("the server saw %d requests, want 10", n)
		}

		// Any later deadline is enough.
		ctx, cancel = context.WithTimeout(t.Context(), time.Second+time.Nanosecond)
		defer cancel()
		if code, err := get(ctx, c); err != nil || code != 200 {
			t.Fatalf("get with a 1.000000001s deadline: %d, %v; want 200", code, err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("the request waited %v, want 1s", d)
		}

		// Cancelled while waiting.
		for range 9 {
			get(t.Context(), c)
		}
		ctx, cancel = context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := get(ctx, c)
			done <- err
		}()
		time.Sleep(500 * time.Millisecond) // virtual time: the bubble's clock
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled get: %v, want context.Canceled", err)
		}
		if n := served.Load(); n != 20 {
			t.Errorf("the server saw %d requests, want 20", n)
		}
	})
}

// When another client spends the same key, a 429 can come back; the
// Transport then holds the host for its Retry-After, and the next request
// is admitted.
func TestRefusalHoldsHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, lim, _ := limited(t, tenPerSecond)
		if code, err := get(t.Context(), c); err != nil || code != 200 {
			t.Fatalf("first get: %d, %v", code, err)
		}
		// Someone else empties the bucket behind the client's back.
		if d, err := lim.AllowN(t.Context(), "client", 9); err != nil || !d.Allowed {
			t.Fatalf("AllowN(9): %+v, %v", d, err)
		}
		start := time.Now()
		if code, err := get(t.Context(), c); err != nil || code != http.StatusTooManyRequests {
			t.Fatalf("get: %d, %v; want 429", code, err)
		}
		if code, err := get(t.Context(), c); err != nil || code != 200 {
			t.Fatalf("get after the 429: %d, %v; want 200", code, err)
		}
		// Retry-After is the wait for one token, 100ms, rounded up to 1s.
		if d := time.Since(start); d != time.Second {
			t.Errorf("the request after the 429 waited %v, want 1s (Retry-After)", d)
		}
	})
}

// A host that sends no rate limit headers is not paced once its first
// response has shown that: requests go concurrently.
func TestUnlimitedHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var inHandler atomic.Int64
		pn := newPipeNet()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if inHandler.Add(1) > 1 {
				<-release
			}
		})}
		go srv.Serve(pn)
		base := &http.Transport{DialContext: pn.dial}
		defer func() {
			base.CloseIdleConnections()
			srv.Close()
		}()
		c := &http.Client{Transport: pace.New(base)}
		if code, err := get(t.Context(), c); err != nil || code != 200 {
			t.Fatalf("first get: %d, %v", code, err)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { get(t.Context(), c) })
		}
		synctest.Wait()
		if n := inHandler.Load(); n != 4 {
			t.Errorf("%d requests reached the handler, want all 4 (3 at once)", n)
		}
		close(release)
		wg.Wait()
	})
}

// An in-flight limit (RateLimit-Policy with qu="concurrent-requests", as
// httplimit.InFlight sends) bounds the requests in flight, not units: the
// Transport keeps up to q of its requests in flight at once, and holds the
// next until one returns, rather than going one at a time.
func TestInFlightPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		defer store.Close()
		f, err := inflight.New(store, "busy", 3)
		if err != nil {
			t.Fatal(err)
		}
		m, err := httplimit.New(httplimit.InFlight("", httplimit.InFlightLimit{InFlight: f}))
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var inHandler atomic.Int64
		pn := newPipeNet()
		srv := &http.Server{Handler: m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if inHandler.Add(1) > 1 {
				<-release
			}
		}))}
		go srv.Serve(pn)
		base := &http.Transport{DialContext: pn.dial}
		defer func() {
			base.CloseIdleConnections()
			srv.Close()
		}()
		c := &http.Client{Transport: pace.New(base)}
		if code, err := get(t.Context(), c); err != nil || code != 200 {
			t.Fatalf("first get: %d, %v", code, err)
		}
		var wg sync.WaitGroup
		codes := make([]int, 4)
		for i := range 4 {
			wg.Go(func() { codes[i], _ = get(t.Context(), c) })
		}
		synctest.Wait()
		if n := inHandler.Load(); n != 4 {
			t.Errorf("%d requests reached the handler, want 4 (3 at once, the 4th held by the Transport)", n)
		}
		close(release)
		wg.Wait()
		for i, code := range codes {
			if code != 200 {
				t.Errorf("request %d: %d, want 200", i, code)
			}
		}
	})
}

// A leaky-bucket queue behind httplimit's default maximum delay (10 s):
// a queue of 30 draining 1 per second holds at most 11 requests that its
// maximum lets through (delays 0 to 10 s). The middleware advertises that
// (q=11, and after each admission r = what still fits), so 40 requests
// from 16 goroutines sharing the Transport get no 429.
func TestLeakyQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, served := limited(t, sluice.Policy{Name: "queue", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30})
		var (
			next   atomic.Int64
			wg     sync.WaitGroup
			counts [600]atomic.Int64
		)
		for range 16 {
			wg.Go(func() {
				for next.Add(1) <= 40 {
					code, err := get(t.Context(), c)
					if err != nil {
						t.Error(err)
						return
					}
					counts[code].Add(1)
				}
			})
		}
		wg.Wait()
		if n := counts[http.StatusTooManyRequests].Load(); n != 0 {
			t.Errorf("%d requests refused with 429, want 0", n)
		}
		if n := counts[http.StatusOK].Load(); n != 40 || served.Load() != 40 {
			t.Errorf("%d requests answered 200 of %d served, want 40", n, served.Load())
		}
	})
}
