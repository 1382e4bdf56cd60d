// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestCloseDuringCall: a decision whose call to Redis is in flight when
// Close closes the client (a store made by Open) is refused with an error
// wrapping sluice.ErrStoreClosed, under the default failure mode (fail
// open), for Allow (a one-request script) and AllowAll (take.lua); and
// Close is not counted as a failure of Redis.
func TestCloseDuringCall(t *testing.T) {
	p := sluice.Policy{Name: "c", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}
	for name, decide := range map[string]func(l *sluice.Limiter) (bool, error){
		"Allow": func(l *sluice.Limiter) (bool, error) {
			d, err := l.Allow(context.Background(), "k")
			return d.Allowed, err
		},
		"AllowAll": func(l *sluice.Limiter) (bool, error) {
			r, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: l, Key: "a"}, sluice.Check{Limiter: l, Key: "b"})
			return r.Allowed, err
		},
	} {
		t.Run(name, func(t *testing.T) {
			proxy, stall := stallProxy(t, sluicetest.StartRedis(t))
			s, err := Open("redis://" + proxy)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Ping(t.Context()); err != nil {
				t.Fatal(err)
			}
			l, err := sluice.NewLimiter(s, p)
			if err != nil {
				t.Fatal(err)
			}
			stall()
			calls := s.Stats().Calls
			type outcome struct {
				allowed bool
				err     error
			}
			out := make(chan outcome, 1)
			go func() {
				allowed, err := decide(l)
				out <- outcome{allowed, err}
			}()
			for s.Stats().Calls == calls {
				runtime.Gosched() // until the call has begun
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			o := <-out
			if o.allowed || !errors.Is(o.err, sluice.ErrStoreClosed) {
				t.Fatalf("a decision in flight at Close: allowed %v, error %v; want refused with sluice.ErrStoreClosed", o.allowed, o.err)
			}
			if st := s.Stats(); st.Errors != 0 {
				t.Fatalf("Close counted as a failure of Redis: %+v", st)
			}
		})
	}
}

// TestCloseWhileBatched: a Take waiting in the open batch (behind a call
// in flight) when Close returns is never sent: it fails with an error
// wrapping sluice.ErrStoreClosed, on a store made by New (whose client
// Close leaves open) and by Open.
func TestCloseWhileBatched(t *testing.T) {
	p := sluice.Policy{Name: "b", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}
	addr := sluicetest.StartRedis(t)
	for name, open := range map[string]func() *Store{
		"New": func() *Store { return newStore(t, newClient(t, addr)) },
		"Open": func() *Store {
			s, err := Open("redis://" + addr)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open()
			inFlightForever(t, s)
			type outcome struct {
				d   sluice.Decision
				err error
			}
			out := make(chan outcome, 1)
			go func() {
				d, err := s.Take(context.Background(), p, name, 1)
				out <- outcome{d, err}
			}()
			// Hold the gathering's lock from the moment the Take is in the
			// batch until Close has returned, so that the batch's timer
			// cannot send it before.
			g := &s.gathering
			for {
				g.mu.Lock()
				if g.open != nil && len(g.open.ms) == 1 {
					break
				}
				g.mu.Unlock()
				runtime.Gosched()
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			g.mu.Unlock()
			o := <-out
			if o.d.Allowed || !errors.Is(o.err, sluice.ErrStoreClosed) {
				t.Fatalf("a Take in a batch at Close: %+v, %v; want refused with sluice.ErrStoreClosed", o.d, o.err)
			}
		})
	}
}

// TestShortDeadlineNoBypass: callers whose deadline is shorter than the
// store's deadline margin (a gRPC client sets its own) on a healthy Redis
// get Redis's decisions, or a refusal once their deadline has passed,
// under the default failure mode (fail open): never an admission past the
// limit. Before, such calls were not made and the failure mode admitted
// every one.
func TestShortDeadlineNoBypass(t *testing.T) {
	for name, open := range map[string]func(addr string) *Store{
		"New": func(addr string) *Store { return newStore(t, newClient(t, addr)) },
		"Open": func(addr string) *Store {
			s, err := Open("redis://" + addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := open(sluicetest.StartRedis(t))
			p := sluice.Policy{Name: "d", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour}
			l, err := sluice.NewLimiter(s, p)
			if err != nil {
				t.Fatal(err)
			}
			admitted, decided := 0, 0
			for _, left := range []time.Duration{100 * time.Microsecond, time.Millisecond, DefaultDeadlineMargin} {
				for range 50 {
					ctx, cancel := context.WithTimeout(t.Context(), left)
					d, err := l.Allow(ctx, "k")
					if err != nil && ctx.Err() == nil {
						t.Fatalf("Allow with %v left: %v, but its context had not ended", left, err)
					}
					cancel()
					if err == nil {
						decided++
					}
					if d.Allowed {
						admitted++
					}
				}
			}
			if admitted > 1 {
				t.Fatalf("%d of 150 short-deadline calls admitted at a limit of 1", admitted)
			}
			t.Logf("%d of 150 decided by Redis in time", decided)
			if st := s.Stats(); st.Errors != 0 {
				t.Fatalf("short deadlines counted as failures of Redis: %+v", st)
			}
		})
	}
}

// TestShortDeadlineStalledRedis: on a Redis that has stopped answering, a
// caller whose deadline leaves Redis less than the margin after the margin
// (here 2.5 to 4 ms, where the margin would leave 0.25 to 1.6 ms) is
// refused once its context has ended, under the default failure mode
// (fail open): the bound was its own choice, not Redis's slowness. A caller
// with time to spare (30 ms) gets the failure mode's answer before its
// deadline, as WithDeadlineMargin says.
func TestShortDeadlineStalledRedis(t *testing.T) {
	proxy, stall := stallProxy(t, sluicetest.StartRedis(t))
	s, err := Open("redis://" + proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := sluice.NewLimiter(s, sluice.Policy{Name: "s", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	stall()
	for _, left := range []time.Duration{2500 * time.Microsecond, 3 * time.Millisecond, 4 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(t.Context(), left)
		d, err := l.Allow(ctx, "k")
		if d.Allowed || err == nil || ctx.Err() == nil {
			t.Fatalf("Allow with %v left on a stalled Redis: %+v, %v (context ended: %v); want refused after its deadline", left, d, err, ctx.Err() != nil)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	if d, err := l.Allow(ctx, "k"); !d.Allowed || err == nil || ctx.Err() != nil {
		t.Fatalf("Allow with 30ms left on a stalled Redis: %+v, %v (context ended: %v); want the failure mode's admission before the deadline", d, err, ctx.Err() != nil)
	}
}
