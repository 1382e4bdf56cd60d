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
