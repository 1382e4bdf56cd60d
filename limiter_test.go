// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// testStore is the simplest correct Store: one mutex over a map of states,
// time from time.Now (fake inside a synctest bubble). The real stores are
// tested against the models by storetest; this one lets the Limiter's own
// logic be tested without them.
type testStore struct {
	mu     sync.Mutex
	states map[string]model.State
	err    error // when set, every call fails with it
	closed bool
}

func newTestStore() *testStore { return &testStore{states: map[string]model.State{}} }

func (s *testStore) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	var d [1]sluice.Decision
	err := s.TakeAll(ctx, []sluice.Request{{Policy: p, Key: key, Cost: cost}}, d[:])
	return d[0], err
}

func (s *testStore) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sluice.ErrStoreClosed
	}
	if s.err != nil {
		return s.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	work := map[string]model.State{}
	ok := true
	for i, r := range reqs {
		m, err := model.New(r.Policy)
		if err != nil {
			return err
		}
		id := r.Policy.Name + "\x00" + r.Key
		st, seen := work[id]
		if !seen {
			st = s.states[id]
		}
		if r.Force {
			work[id], out[i] = m.Charge(st, now, r.Cost)
			continue
		}
		work[id], out[i] = m.Take(st, now, r.Cost)
		ok = ok && out[i].Allowed
	}
	if !ok {
		for i, r := range reqs {
			if out[i].Allowed || r.Force {
				m, _ := model.New(r.Policy)
				_, out[i] = m.Take(s.states[r.Policy.Name+"\x00"+r.Key], now, 0)
			}
		}
		return nil
	}
	for id, st := range work {
		s.states[id] = st
	}
	return nil
}

func (s *testStore) Reset(_ context.Context, p sluice.Policy, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.states, p.Name+"\x00"+key)
	return nil
}

func (s *testStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func TestLimiterRejectsBadInput(t *testing.T) {
	if _, err := sluice.NewLimiter(newTestStore(), sluice.Policy{Algorithm: "nope", Limit: 1, Period: time.Second}); err == nil {
		t.Error("unknown algorithm accepted")
	}
	if _, err := sluice.NewLimiter(nil, sluice.Policy{Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}); err == nil {
		t.Error("nil store accepted")
	}
	l, err := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.AllowN(context.Background(), "k", -1); err == nil || d.Allowed {
		t.Errorf("cost -1: got %+v, %v; want an error and no admission", d, err)
	}
}

func TestFailureModes(t *testing.T) {
	boom := errors.New("boom")
	for _, mode := range []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed} {
		s := newTestStore()
		s.err = boom
		l, _ := sluice.NewLimiter(s, sluice.Policy{Name: "p", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second}, sluice.WithFailureMode(mode))
		d, err := l.Allow(context.Background(), "k")
		if !errors.Is(err, boom) {
			t.Errorf("%v: error %v, want it to wrap the store's", mode, err)
		}
		if d.Allowed != (mode == sluice.FailOpen) {
			t.Errorf("fail-%v: allowed=%v", mode, d.Allowed)
		}
		r, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: l, Key: "k", Cost: 1}, sluice.Check{Limiter: l, Key: "j", Cost: 1})
		if !errors.Is(err, boom) || r.Allowed != (mode == sluice.FailOpen) {
			t.Errorf("fail-%v sluice.AllowAll: %+v, %v", mode, r, err)
		}
	}
}

// TestCallerGaveUp: a context that has ended is no store failure: the
// request is not admitted, whatever the failure mode.
func TestCallerGaveUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}, sluice.WithFailureMode(sluice.FailOpen))
	if d, err := l.Allow(ctx, "k"); !errors.Is(err, context.Canceled) || d.Allowed {
		t.Errorf("Allow with a cancelled context: %+v, %v; want not allowed and context.Canceled", d, err)
	}
	r, err := sluice.AllowAll(ctx, sluice.Check{Limiter: l, Key: "k", Cost: 1}, sluice.Check{Limiter: l, Key: "j", Cost: 1})
	if !errors.Is(err, context.Canceled) || r.Allowed {
		t.Errorf("sluice.AllowAll with a cancelled context: %+v, %v", r, err)
	}
	if _, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: l, Key: "k", Cost: 1}, sluice.Check{Limiter: nil, Key: "j", Cost: 1}); err == nil {
		t.Error("sluice.AllowAll with a nil Limiter: no error")
	}
	if _, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: nil, Key: "k", Cost: 1}); err == nil {
		t.Error("sluice.AllowAll with a nil first Limiter: no error")
	}
}

func TestAllowAllIsAllOrNothing(t *testing.T) {
	s := newTestStore()
	perIP, _ := sluice.NewLimiter(s, sluice.Policy{Name: "ip", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	perOrg, _ := sluice.NewLimiter(s, sluice.Policy{Name: "org", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Minute})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if r, err := sluice.AllowAll(ctx, sluice.Check{Limiter: perIP, Key: "10.0.0.1", Cost: 1}, sluice.Check{Limiter: perOrg, Key: "acme", Cost: 1}); err != nil || !r.Allowed {
			t.Fatalf("request %d: %+v, %v", i, r, err)
		}
	}
	r, err := sluice.AllowAll(ctx, sluice.Check{Limiter: perIP, Key: "10.0.0.1", Cost: 1}, sluice.Check{Limiter: perOrg, Key: "acme", Cost: 1})
	if err != nil || r.Allowed || r.Refused != 1 {
		t.Fatalf("4th request: %+v, %v; want refused by check 1", r, err)
	}
	if !r.Decisions[0].Allowed || r.Decisions[0].Remaining != 7 {
		t.Errorf("per-IP decision in a refused batch: %+v, want allowed with 7 remaining (unconsumed)", r.Decisions[0])
	}
	if d, _ := perIP.AllowN(ctx, "10.0.0.1", 0); d.Remaining != 7 {
		t.Errorf("per-IP remaining %d after a refused batch, want 7: the refusal consumed it", d.Remaining)
	}
	other, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "x", Algorithm: sluice.GCRA, Limit: 1, Period: time.Second})
	if _, err := sluice.AllowAll(ctx, sluice.Check{Limiter: perIP, Key: "a", Cost: 1}, sluice.Check{Limiter: other, Key: "a", Cost: 1}); err == nil {
		t.Error("limiters over different stores: no error")
	}
	if _, err := sluice.AllowAll(ctx, sluice.Check{Limiter: perIP, Key: "a", Cost: -2}); err == nil {
		t.Error("negative cost: no error")
	}
}

func TestWaitSleepsRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 2, Period: time.Second, Burst: 1})
		ctx := context.Background()
		start := time.Now()
		for i := 0; i < 3; i++ {
			if _, err := l.Wait(ctx, "k", 1); err != nil {
				t.Fatal(err)
			}
		}
		// One at 0, then one every 500ms.
		if got := time.Since(start); got != time.Second {
			t.Errorf("three waits took %v, want 1s", got)
		}
	})
}

func TestWaitCancelledConsumesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "p", Algorithm: sluice.SlidingLog, Limit: 1, Period: time.Minute})
		ctx := context.Background()
		if _, err := l.Wait(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { _, err := l.Wait(cctx, "k", 1); done <- err }()
		time.Sleep(10 * time.Second) // fake time: the waiter is asleep
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Wait returned %v", err)
		}
		if d, _ := l.AllowN(ctx, "k", 0); d.Allowed || d.Remaining != 0 || d.RetryAfter != 50*time.Second || d.ResetAfter != 50*time.Second {
			t.Errorf("after the cancelled wait: %+v; want only the first request recorded", d)
		}
		// A deadline that cannot be met fails at once, without sleeping.
		dctx, dcancel := context.WithTimeout(ctx, time.Second)
		defer dcancel()
		before := time.Now()
		if _, err := l.Wait(dctx, "k", 1); err == nil || time.Since(before) != 0 {
			t.Errorf("Wait with an unreachable deadline: %v after %v", err, time.Since(before))
		}
	})
}

func TestWaitImpossible(t *testing.T) {
	l, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "p", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 3})
	if _, err := l.Wait(context.Background(), "k", 4); !errors.Is(err, sluice.ErrImpossible) {
		t.Errorf("Wait(4) with burst 3: %v, want sluice.ErrImpossible", err)
	}
}

func TestWaitLeakyBucketDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "q", Algorithm: sluice.LeakyBucket, Limit: 10, Period: time.Second, Burst: 5})
		ctx := context.Background()
		start := time.Now()
		var released []time.Duration
		for i := 0; i < 3; i++ {
			if _, err := l.Wait(ctx, "k", 1); err != nil {
				t.Fatal(err)
			}
			released = append(released, time.Since(start))
		}
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}
		for i := range want {
			if released[i] != want[i] {
				t.Fatalf("released at %v, want %v", released, want)
			}
		}
		// The queue is drained at 300ms; a 5-unit wait with a 100ms
		// deadline is refused without taking a place.
		if _, err := l.Wait(ctx, "k", 5); err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := l.Wait(dctx, "k", 1); err == nil {
			t.Error("a queue delay beyond the deadline was accepted")
		}
	})
}

// TestFailureModeStringInvalid: a value that is none of the three modes
// (one read from configuration before NewLimiter refuses it) prints as
// itself, not as "open": a log line or a metric label must not say a
// limiter fails open when its mode is garbage.
func TestFailureModeStringInvalid(t *testing.T) {
	for m, want := range map[sluice.FailureMode]string{
		sluice.FailOpen: "open", sluice.FailClosed: "closed", sluice.FailLocal: "local",
		3: "FailureMode(3)", 255: "FailureMode(255)",
	} {
		if got := m.String(); got != want {
			t.Errorf("FailureMode(%d).String() = %q, want %q", uint8(m), got, want)
		}
	}
}
