// SPDX-License-Identifier: Apache-2.0

package shard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestNilStore: a shard store over a nil store refuses with an error
// instead of panicking.
func TestNilStore(t *testing.T) {
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("a shard store over a nil store panicked: %v", r)
		}
	}()
	s := shard.New(nil, 4)
	if d, err := s.Take(context.Background(), p, "k", 1); !errors.Is(err, sluice.ErrStoreClosed) || d.Allowed {
		t.Errorf("over a nil store: %+v %v, want refused with an error", d, err)
	}
}

// TestNilCount: NewFunc with a nil count leaves every key whole (it
// panicked at the first Take).
func TestNilCount(t *testing.T) {
	inner := memstore.New()
	s := shard.NewFunc(inner, nil)
	defer s.Close()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour}
	if d, err := s.Take(context.Background(), p, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("first: %+v %v, want admitted", d, err)
	}
	if d, err := s.Take(context.Background(), p, "k", 1); err != nil || d.Allowed {
		t.Errorf("second at 1/hour: %+v %v, want refused", d, err)
	}
}

// TestPeekAsksEveryShard: a peek (cost 0) answers as a request of cost 1
// would: with shard 0 empty and shard 1 holding units, both are admitted (the
// peek asked shard 0 alone, and refused).
func TestPeekAsksEveryShard(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	mem := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	defer mem.Close()
	p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 4, Period: time.Minute}
	l, err := sluice.NewLimiter(shard.New(mem, 2), p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Empty shard 0 (key "k~0": the key over a store that is no Keyer).
	if d, err := mem.Take(ctx, shard.Policies(p, 2)[0], "k~0", 2); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	for _, want := range []bool{true, true, false} {
		peek, err := l.AllowN(ctx, "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		one, err := l.AllowN(ctx, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if peek.Allowed != want || one.Allowed != want {
			t.Fatalf("peek admitted %v, the request of cost 1 right after %v; want both %v", peek.Allowed, one.Allowed, want)
		}
	}
}
