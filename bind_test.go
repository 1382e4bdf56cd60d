// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// tagged is a store wrapper of a type == cannot compare (it holds a
// slice): a Binder whose bound policy names its store.
type tagged struct {
	sluice.Store
	tags []string
	took *int
}

func (s tagged) Bind(p sluice.Policy) (sluice.BoundPolicy, error) { return taggedBound{s, p}, nil }

func (s tagged) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	*s.took++
	return s.Store.Take(ctx, p, key, cost)
}

type taggedBound struct {
	s tagged
	p sluice.Policy
}

func (b taggedBound) Take(ctx context.Context, key string, cost int64) (sluice.Decision, error) {
	return b.s.Take(ctx, b.p, key, cost)
}

func (b taggedBound) Store() sluice.Store { return b.s }

// TestBindUncomparableStore: NewLimiter over a Binder whose type == cannot
// compare does not panic when it checks that the bound policy asks the
// limiter's own store, and the limiter still decides through that store.
func TestBindUncomparableStore(t *testing.T) {
	s := memstore.New(memstore.WithSweepInterval(0))
	defer s.Close()
	var took int
	l, err := sluice.NewLimiter(tagged{Store: s, tags: []string{"x"}, took: &took}, sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(context.Background(), "k"); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if took != 1 {
		t.Errorf("the store's Take ran %d times for one decision, want 1", took)
	}
}

// TestBoundNilStore: the binding of a nil store refuses with an error
// wrapping ErrStoreClosed (it panicked at the first Take).
func TestBoundNilStore(t *testing.T) {
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour}
	d, err := sluice.Bound(nil, p).Take(context.Background(), "k", 1)
	if d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
		t.Errorf("Bound(nil, p).Take = %+v, %v; want refused with ErrStoreClosed", d, err)
	}
}
