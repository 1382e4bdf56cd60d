// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// unreachable is a store whose backend cannot be reached: every call
// fails, as an unreachable Redis does. (A closed store is no outage: it
// is never a reason to admit.)
type unreachable struct{}

var errUnreachable = errors.New("dial tcp: connection refused")

func (unreachable) Take(context.Context, sluice.Policy, string, int64) (sluice.Decision, error) {
	return sluice.Decision{}, errUnreachable
}

func (unreachable) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error {
	return errUnreachable
}

func (unreachable) Reset(context.Context, sluice.Policy, string) error { return errUnreachable }

func (unreachable) Close() error { return nil }

// deadStore is a store that fails every call.
func deadStore(t *testing.T) sluice.Store {
	t.Helper()
	return unreachable{}
}

func TestShare(t *testing.T) {
	for _, c := range []struct {
		p            sluice.Policy
		r            int
		limit, burst int64
		ok           bool
	}{
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}, 1, 10, 0, true},
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}, 3, 3, 3, true},
		{sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second, Burst: 20}, 3, 3, 6, true},
		{sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Hour}, 7, 142, 0, true},
		{sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 2, Period: time.Hour}, 3, 0, 0, false},
		{sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 9, Period: time.Hour, Burst: 2}, 3, 0, 0, false},
	} {
		s, ok := c.p.Share(c.r)
		if ok != c.ok || (ok && (s.Limit != c.limit || s.Burst != c.burst || s.Period != c.p.Period || s.Algorithm != c.p.Algorithm)) {
			t.Errorf("%v .Share(%d) = %v, %v; want limit %d burst %d, %v", c.p, c.r, s, ok, c.limit, c.burst, c.ok)
		}
		if ok && int64(c.r)*s.Limit > c.p.Limit {
			t.Errorf("%v .Share(%d): %d shares of %d exceed the limit", c.p, c.r, c.r, s.Limit)
		}
	}
}

func TestFailLocalNeedsLocalStore(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}
	if _, err := sluice.NewLimiter(memstore.New(), p, sluice.WithFailureMode(sluice.FailLocal)); err == nil {
		t.Fatal("FailLocal without a local store: no error")
	}
	if got := sluice.FailLocal.String(); got != "local" {
		t.Fatalf("FailLocal.String() = %q", got)
	}
}

// outageBound is the package documentation's bound on what R replicas admit
// for one key during an outage of length d under p.
func outageBound(p sluice.Policy, r int, d time.Duration) int64 {
	s, ok := p.Share(r)
	if !ok {
		return 0
	}
	switch p.Algorithm {
	case sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket:
		b := s.Burst
		if b == 0 {
			b = s.Limit
		}
		return int64(r) * (b + s.Limit*int64(d)/int64(p.Period))
	case sluice.SlidingLog:
		return int64(r) * s.Limit * (int64(d/p.Period) + 1)
	default:
		return int64(r) * s.Limit * ((int64(d)+int64(p.Period)-1)/int64(p.Period) + 1)
	}
}

// TestFailLocalBound: 3 replicas (three Limiters, each with its own local
// store, over a store that fails every call) under a request every P/50
// each, for an outage of 2.5 periods that starts shortly before a window
// boundary: every request is answered, with the store's error; together
// they admit no more than the documented bound, and reach it exactly.
func TestFailLocalBound(t *testing.T) {
	const replicas = 3
	for _, p := range []sluice.Policy{
		{Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second, Burst: 20},
		{Algorithm: sluice.GCRA, Limit: 100, Period: time.Minute},
		{Algorithm: sluice.LeakyBucket, Limit: 31, Period: time.Second, Burst: 7},
		{Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Second},
		{Algorithm: sluice.SlidingWindow, Limit: 10, Period: time.Second},
		{Algorithm: sluice.SlidingLog, Limit: 10, Period: time.Second},
	} {
		t.Run(string(p.Algorithm), func(t *testing.T) {
			// Start five steps (enough requests to fill a window) before a
			// window boundary, so the outage meets ⌈D/P⌉+1 windows.
			step := p.Period / 50
			clock := sluicetest.NewClock(time.Unix(0, 0).Add(100*p.Period - 5*step))
			dead := deadStore(t)
			lims := make([]*sluice.Limiter, replicas)
			for i := range lims {
				local := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
				t.Cleanup(func() { local.Close() })
				l, err := sluice.NewLimiter(dead, p, sluice.WithFailureMode(sluice.FailLocal),
					sluice.WithLocalStore(local, sluice.FixedReplicas(replicas)))
				if err != nil {
					t.Fatal(err)
				}
				lims[i] = l
			}
			const steps = 125 // D = 2.5 P
			var admitted int64
			for k := 0; k <= steps; k++ {
				for _, l := range lims {
					d, err := l.Allow(context.Background(), "k")
					if err == nil {
						t.Fatal("a dead store's call returned no error")
					}
					if d.Allowed {
						admitted++
					}
				}
				if k < steps {
					clock.Advance(step)
				}
			}
			bound := outageBound(p, replicas, steps*step)
			if admitted > bound {
				t.Fatalf("admitted %d during an outage of %v, over the bound %d", admitted, steps*step, bound)
			}
			if p.Algorithm != sluice.SlidingWindow && admitted != bound {
				// The sliding window weighs the previous window, so it
				// stays under the window bound; the others reach theirs.
				t.Fatalf("admitted %d, want exactly the bound %d (is the bound tight?)", admitted, bound)
			}
			if admitted == 0 {
				t.Fatal("nothing admitted during the outage")
			}
			t.Logf("admitted %d, bound %d, exact limit over the same span from idle: %d", admitted, bound, outageBound(p, 1, steps*step))
		})
	}
}

// TestFailLocalAllowAll: on a failing store a batch of FailLocal checks is
// decided all-or-nothing on the local store, and a FailClosed check in the
// batch refuses it without consuming any local share.
func TestFailLocalAllowAll(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	local := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	defer local.Close()
	dead := deadStore(t)
	mk := func(limit int64, mode sluice.FailureMode) *sluice.Limiter {
		l, err := sluice.NewLimiter(dead, sluice.Policy{Name: fmt.Sprint("p", limit, mode), Algorithm: sluice.FixedWindow, Limit: limit, Period: time.Hour},
			sluice.WithFailureMode(mode), sluice.WithLocalStore(local, sluice.FixedReplicas(2)))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := mk(10, sluice.FailLocal), mk(4, sluice.FailLocal) // shares 5 and 2
	closed := mk(100, sluice.FailClosed)
	ctx := context.Background()
	res, err := sluice.AllowAll(ctx, sluice.Check{Limiter: a, Key: "x", Cost: 1}, sluice.Check{Limiter: closed, Key: "x", Cost: 1})
	if err == nil || res.Allowed || res.Refused != 1 {
		t.Fatalf("with a fail-closed check: %+v %v; want refused by check 1", res, err)
	}
	for i := range 3 {
		res, err := sluice.AllowAll(ctx, sluice.Check{Limiter: a, Key: "x", Cost: 1}, sluice.Check{Limiter: b, Key: "x", Cost: 1})
		if want := i < 2; err == nil || res.Allowed != want {
			t.Fatalf("batch %d: %+v %v; want allowed %v (b's share is 2)", i, res, err, want)
		}
	}
	// a's share of 5 lost nothing to the refused batches: 3 more fit.
	for i := range 4 {
		d, _ := a.Allow(ctx, "x")
		if want := i < 3; d.Allowed != want {
			t.Fatalf("a alone, request %d: allowed %v, want %v", i, d.Allowed, want)
		}
	}
}

// TestFailLocalRedisOutage: a FailLocal limiter on a real Redis that is
// killed decides locally, with its share, while Redis is gone, and on the
// store again once Redis is back (the breaker's probe closes it).
func TestFailLocalRedisOutage(t *testing.T) {
	srv := sluicetest.StartRedisServer(t)
	store, err := redisstore.Open("redis://" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	local := memstore.New()
	defer local.Close()
	p := sluice.Policy{Name: "outage", Algorithm: sluice.SlidingLog, Limit: 10, Period: time.Hour}
	l, err := sluice.NewLimiter(store, p, sluice.WithFailureMode(sluice.FailLocal),
		sluice.WithLocalStore(local, sluice.FixedReplicas(2)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 4 {
		if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("request %d on Redis: %+v %v", i, d, err)
		}
	}
	srv.Kill()
	var admitted int
	for range 20 {
		d, err := l.Allow(ctx, "k")
		if err == nil {
			t.Fatal("a call to a killed Redis returned no error")
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("admitted %d during the outage, want the share of 2 replicas: 5", admitted)
	}
	srv.Restart() // empty: the store admits 10 again
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := l.Allow(ctx, "k")
		if err == nil {
			if !d.Allowed || d.Remaining != 9 {
				t.Fatalf("first decision of the restarted Redis: %+v, want allowed with 9 remaining", d)
			}
			break
		}
		if !errors.Is(err, redisstore.ErrUnavailable) && d.Allowed {
			t.Fatalf("local share exhausted, yet admitted: %+v", d)
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis not used again 10s after its restart: %v; stats %+v", err, store.Stats())
		}
		time.Sleep(10 * time.Millisecond) // polling the breaker's probe
	}
}

// A limiter that fails local: while its store fails, this replica (one of
// 3) decides alone with a third of the limit.
func ExampleWithLocalStore() {
	store := unreachable{} // a store that fails every call, as an unreachable Redis does
	local := memstore.New()
	defer local.Close()
	lim, _ := sluice.NewLimiter(store, sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Hour},
		sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, sluice.FixedReplicas(3)))
	for range 4 {
		d, err := lim.Allow(context.Background(), "tenant-1")
		fmt.Println(d.Allowed, d.Limit, err != nil)
	}
	// Output:
	// true 3 true
	// true 3 true
	// true 3 true
	// false 3 true
}
