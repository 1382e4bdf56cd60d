// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/memstore"
)

// slowStore answers after delay, or when the caller's context ends, as the
// Store contract asks of a store that honours deadlines.
type slowStore struct {
	sluice.Store
	delay time.Duration
}

func (s slowStore) wait(ctx context.Context) error {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowStore) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	if err := s.wait(ctx); err != nil {
		return sluice.Decision{}, err
	}
	return s.Store.Take(ctx, p, key, cost)
}

func (s slowStore) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.TakeAll(ctx, reqs, out)
}

// failingStore fails every call, as a store that is down.
type failingStore struct{ sluice.Store }

var errDown = errors.New("store down")

func (failingStore) Take(context.Context, sluice.Policy, string, int64) (sluice.Decision, error) {
	return sluice.Decision{}, errDown
}

func (failingStore) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error {
	return errDown
}

// TestUserEdges holds the Limiter to what a user writing it gets at its
// edges: zero values, nil arguments, cancelled callers, closed and slow
// stores, negative costs. Each call must return (no panic), refuse, and
// say why with an error.
func TestUserEdges(t *testing.T) {
	p := sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()

	newLimiter := func(t *testing.T, store sluice.Store, opts ...sluice.Option) *sluice.Limiter {
		t.Helper()
		l, err := sluice.NewLimiter(store, p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	modes := func(t *testing.T, store sluice.Store) map[string]*sluice.Limiter {
		local := memstore.New()
		t.Cleanup(func() { local.Close() })
		return map[string]*sluice.Limiter{
			"open":   newLimiter(t, store, sluice.WithFailureMode(sluice.FailOpen)),
			"closed": newLimiter(t, store, sluice.WithFailureMode(sluice.FailClosed)),
			"local":  newLimiter(t, store, sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, nil)),
		}
	}
	type call func(ctx context.Context, l *sluice.Limiter) (bool, error)
	calls := map[string]call{
		"Allow": func(ctx context.Context, l *sluice.Limiter) (bool, error) {
			d, err := l.Allow(ctx, "k")
			return d.Allowed, err
		},
		"AllowN(1)": func(ctx context.Context, l *sluice.Limiter) (bool, error) {
			d, err := l.AllowN(ctx, "k", 1)
			return d.Allowed, err
		},
		"AllowN(0)": func(ctx context.Context, l *sluice.Limiter) (bool, error) {
			d, err := l.AllowN(ctx, "k", 0)
			return d.Allowed, err
		},
		"Wait": func(ctx context.Context, l *sluice.Limiter) (bool, error) {
			d, err := l.Wait(ctx, "k", 1)
			return d.Allowed, err
		},
		"Reserve": func(ctx context.Context, l *sluice.Limiter) (bool, error) {
			r, err := l.Reserve(ctx, "k", 1)
			if _, cerr := r.Commit(ctx, 1); cerr == nil && err != nil {
				return true, errors.New("a refused reservation committed without an error")
			}
			return r.Decision.Allowed, err
		},
		"AllowAll(1)": func(ctx context.Context, l *sluice.Limiter) (bool, error) {
			r, err := sluice.AllowAll(ctx, sluice.Check{Limiter: l, Key: "k"})
			return r.Allowed, err
		},
		"AllowAll(2)": func(ctx context.Context, l *sluice.Limiter) (bool, error) {
			r, err := sluice.AllowAll(ctx, sluice.Check{Limiter: l, Key: "k"}, sluice.Check{Limiter: l, Key: "j"})
			return r.Allowed, err
		},
	}
	refuses := func(t *testing.T, what string, ctx context.Context, l *sluice.Limiter, want error) {
		t.Helper()
		for name, c := range calls {
			allowed, err := func() (allowed bool, err error) {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s: %s panicked: %v", what, name, r)
					}
				}()
				return c(ctx, l)
			}()
			if allowed || err == nil {
				t.Errorf("%s: %s: allowed %v, error %v; want refused with an error", what, name, allowed, err)
			} else if want != nil && !errors.Is(err, want) {
				t.Errorf("%s: %s: error %v; want %v", what, name, err, want)
			}
		}
	}

	t.Run("zero Limiter", func(t *testing.T) {
		var l sluice.Limiter
		refuses(t, "a zero Limiter", bg, &l, sluice.ErrStoreClosed)
	})
	t.Run("nil Limiter", func(t *testing.T) {
		var l *sluice.Limiter
		refuses(t, "a nil *Limiter", bg, l, sluice.ErrStoreClosed)
		if p, s, m := l.Policy(), l.Store(), l.FailureMode(); p != (sluice.Policy{}) || s != nil || m != sluice.FailOpen {
			t.Errorf("a nil *Limiter's Policy, Store, FailureMode: %v, %v, %v; want zero values", p, s, m)
		}
	})
	t.Run("NewLimiter arguments", func(t *testing.T) {
		store := memstore.New()
		defer store.Close()
		for name, tc := range map[string]struct {
			store sluice.Store
			p     sluice.Policy
			opts  []sluice.Option
			want  string
		}{
			"zero Policy":              {store, sluice.Policy{}, nil, "algorithm"},
			"nil store":                {nil, p, nil, "store is nil"},
			"FailLocal, no local":      {store, p, []sluice.Option{sluice.WithFailureMode(sluice.FailLocal)}, "local store"},
			"FailLocal, nil local":     {store, p, []sluice.Option{sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(nil, nil)}, "local store"},
			"unknown failure mode":     {store, p, []sluice.Option{sluice.WithFailureMode(sluice.FailureMode(9))}, "failure mode 9"},
			"limit 0":                  {store, sluice.Policy{Algorithm: sluice.GCRA, Period: time.Second}, nil, "limit 0"},
			"negative burst":           {store, sluice.Policy{Algorithm: sluice.GCRA, Limit: 1, Period: time.Second, Burst: -1}, nil, "burst -1"},
			"burst on a window kind":   {store, sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 1, Period: time.Second, Burst: 2}, nil, "burst 2"},
			"period 0":                 {store, sluice.Policy{Algorithm: sluice.GCRA, Limit: 1}, nil, "period 0"},
			"negative period (window)": {store, sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: -time.Second}, nil, "period -1s"},
		} {
			l, err := func() (l *sluice.Limiter, err error) {
				defer func() {
					if r := recover(); r != nil {
						err = errors.New("panicked")
						t.Errorf("%s: NewLimiter panicked: %v", name, r)
					}
				}()
				return sluice.NewLimiter(tc.store, tc.p, tc.opts...)
			}()
			if err == nil || l != nil {
				t.Errorf("%s: NewLimiter = %v, %v; want an error", name, l, err)
			} else if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %q does not name %q", name, err, tc.want)
			}
		}
		// A nil Option is ignored, as an empty one.
		if _, err := sluice.NewLimiter(store, p, nil); err != nil {
			t.Errorf("NewLimiter with a nil Option: %v", err)
		}
	})
	t.Run("cancelled caller", func(t *testing.T) {
		store := memstore.New()
		defer store.Close()
		for mode, l := range modes(t, store) {
			refuses(t, "fail-"+mode+", cancelled", cancelled, l, context.Canceled)
		}
		// The cancelled calls took nothing: the hour's unit is still there.
		if d, err := newLimiter(t, store).Allow(bg, "k"); err != nil || !d.Allowed {
			t.Errorf("after cancelled calls: %+v %v, want the unit still there", d, err)
		}
	})
	t.Run("cancelled caller, failing store", func(t *testing.T) {
		for mode, l := range modes(t, failingStore{}) {
			// A store that does not look at ctx answers with its own
			// error; the caller is refused all the same.
			refuses(t, "fail-"+mode+", cancelled, store down", cancelled, l, nil)
		}
	})
	t.Run("closed store", func(t *testing.T) {
		store := memstore.New()
		store.Close()
		for mode, l := range modes(t, store) {
			refuses(t, "fail-"+mode+", closed store", bg, l, sluice.ErrStoreClosed)
		}
	})
	t.Run("store down, closed local store", func(t *testing.T) {
		local := memstore.New()
		local.Close()
		l := newLimiter(t, failingStore{}, sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, nil))
		refuses(t, "fail-local, local store closed", bg, l, errDown)
	})
	t.Run("negative cost", func(t *testing.T) {
		store := memstore.New()
		defer store.Close()
		for mode, l := range modes(t, store) {
			if d, err := l.AllowN(bg, "k", -1); err == nil || d.Allowed {
				t.Errorf("fail-%s: AllowN(-1): %+v %v; want refused with an error", mode, d, err)
			}
			if d, err := l.Wait(bg, "k", -1); err == nil || d.Allowed {
				t.Errorf("fail-%s: Wait(-1): %+v %v; want refused with an error", mode, d, err)
			}
			if r, err := sluice.AllowAll(bg, sluice.Check{Limiter: l, Key: "k", Cost: -1}); err == nil || r.Allowed {
				t.Errorf("fail-%s: AllowAll(Cost -1): %+v %v; want refused with an error", mode, r, err)
			}
		}
	})
	t.Run("slow store, 20ms deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := memstore.New()
			defer store.Close()
			for mode, l := range modes(t, slowStore{store, 500 * time.Millisecond}) {
				for name, c := range calls {
					ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
					start := time.Now()
					allowed, err := c(ctx, l)
					cancel()
					if took := time.Since(start); took > 20*time.Millisecond {
						t.Errorf("fail-%s: %s returned after %v, past its 20ms deadline", mode, name, took)
					}
					if allowed || !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("fail-%s: %s: allowed %v, error %v; want refused with DeadlineExceeded", mode, name, allowed, err)
					}
				}
			}
		})
	})
}

// TestWaitCancelledInDelay: a leaky-bucket Wait whose caller goes during
// its queue delay returns a rejection with the error (it returned the
// admitting decision, Allowed true, beside the error).
func TestWaitCancelledInDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithClock(clock.Monotonic()))
		defer store.Close()
		l, err := sluice.NewLimiter(store, sluice.Policy{Name: "q", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 5})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := l.Wait(ctx, "k", 1); err != nil { // released at once
			t.Fatal(err)
		}
		short, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel) // during the next one's 1s delay
		d, err := l.Wait(short, "k", 1)
		if d.Allowed || !errors.Is(err, context.Canceled) {
			t.Errorf("a Wait cancelled in its queue delay: %+v, %v; want a rejection with context.Canceled", d, err)
		}
	})
}
