// SPDX-License-Identifier: Apache-2.0

package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestClosedNeverAdmits: a Limiter over a closed redisstore admits
// nothing under any failure mode, whether it was made before Close or
// after, whether the store had connected or was still connecting (Open
// returns at once), and whether Redis is up or gone; every call says
// ErrStoreClosed.
func TestClosedNeverAdmits(t *testing.T) {
	p := sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Hour}
	local := memstore.New()
	defer local.Close()
	modes := []sluice.Option{
		sluice.WithFailureMode(sluice.FailOpen),
		sluice.WithFailureMode(sluice.FailClosed),
		func(l *sluice.Limiter) {
			sluice.WithFailureMode(sluice.FailLocal)(l)
			sluice.WithLocalStore(local, nil)(l)
		},
	}
	up := sluicetest.StartRedis(t)
	for name, url := range map[string]string{
		"connected":  "redis://" + up,
		"connecting": "redis://127.0.0.1:1", // nothing listens: Open is still connecting at Close
	} {
		s, err := redisstore.Open(url)
		if err != nil {
			t.Fatal(err)
		}
		if name == "connected" {
			if err := s.Ping(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		before := make([]*sluice.Limiter, len(modes))
		for i, m := range modes {
			if before[i], err = sluice.NewLimiter(s, p, m); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		for i, m := range modes {
			after, err := sluice.NewLimiter(s, p, m)
			if err != nil {
				t.Fatal(err)
			}
			for which, l := range map[string]*sluice.Limiter{"made before Close": before[i], "made after Close": after} {
				what := name + ", fail-" + l.FailureMode().String() + ", " + which
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				for range 10 {
					d, err := l.Allow(ctx, "k")
					if d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
						t.Fatalf("%s: Allow = %+v, %v; want refused with ErrStoreClosed", what, d, err)
					}
				}
				if d, err := l.AllowN(ctx, "k", 0); d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
					t.Errorf("%s: a peek = %+v, %v; want refused with ErrStoreClosed", what, d, err)
				}
				if d, err := l.Wait(ctx, "k", 1); d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
					t.Errorf("%s: Wait = %+v, %v; want refused with ErrStoreClosed", what, d, err)
				}
				if r, err := sluice.AllowAll(ctx, sluice.Check{Limiter: l, Key: "a"}, sluice.Check{Limiter: l, Key: "b"}); r.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
					t.Errorf("%s: AllowAll = %+v, %v; want refused with ErrStoreClosed", what, r, err)
				}
				cancel()
			}
		}
	}
}
