// SPDX-License-Identifier: Apache-2.0

package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestClosedErrors: after Close every method that would talk to Redis
// returns an error wrapping sluice.ErrStoreClosed, and nothing is admitted.
func TestClosedErrors(t *testing.T) {
	s, err := redisstore.Open("redis://" + sluicetest.StartRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second}
	r, err := redisstore.NewReplicas(s, "r", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := s.Take(ctx, p, "k", 1)
	errs := map[string]error{"Take": err}
	if d.Allowed {
		t.Error("Take after Close admitted")
	}
	_, _, errs["TakeStamped"] = s.TakeStamped(ctx, p, "k", 1)
	errs["TakeAll"] = s.TakeAll(ctx, []sluice.Request{{Policy: p, Key: "k", Cost: 1}}, make([]sluice.Decision, 1))
	errs["TakeAll(none)"] = s.TakeAll(ctx, nil, nil)
	_, errs["Give"] = s.Give(ctx, p, "k", model.State{}, 1)
	errs["Reset"] = s.Reset(ctx, p, "k")
	errs["Ping"] = s.Ping(ctx)
	_, errs["Acquire"] = s.Acquire(ctx, "c", "k", "h", 1, time.Second)
	_, errs["Release"] = s.Release(ctx, "c", "k", "h")
	_, errs["Extend"] = s.Extend(ctx, "c", "k", "h", time.Second)
	_, errs["Beat"] = r.Beat(ctx)
	errs["Leave"] = r.Leave(ctx)
	for name, err := range errs {
		if !errors.Is(err, sluice.ErrStoreClosed) {
			t.Errorf("%s after Close: %v, want sluice.ErrStoreClosed", name, err)
		}
	}
}

// TestRefundForeignStampClosed: Refund with a stamp that is not the
// store's own (nil, as a wrapper store with no stamp passes on) fails with
// an error wrapping sluice.ErrStoreClosed after Close and on the zero
// Store, as every method does. (It answered false and nil, as an open
// store.) It needs no Redis.
func TestRefundForeignStampClosed(t *testing.T) {
	ctx := t.Context()
	p := sluice.Policy{Name: "r", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}
	s, err := redisstore.Open("redis://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	for _, stamp := range []any{nil, "foreign"} {
		if ok, err := s.Refund(ctx, p, "k", stamp, 1); ok || err != nil {
			t.Errorf("Refund(%v) on an open store: %v, %v; want false, nil", stamp, ok, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		name string
		s    *redisstore.Store
	}{{"a closed Store", s}, {"the zero Store", new(redisstore.Store)}} {
		for _, stamp := range []any{nil, "foreign"} {
			if ok, err := st.s.Refund(ctx, p, "k", stamp, 1); ok || !errors.Is(err, sluice.ErrStoreClosed) {
				t.Errorf("Refund(%v) on %s: %v, %v; want false and an error wrapping sluice.ErrStoreClosed", stamp, st.name, ok, err)
			}
		}
	}
}
