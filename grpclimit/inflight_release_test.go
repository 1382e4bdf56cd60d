// SPDX-License-Identifier: Apache-2.0

package grpclimit

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

// samples is a Controller that counts what it observes.
type samples struct {
	mu sync.Mutex
	n  int
}

func (c *samples) Limit() int64 { return 100 }
func (c *samples) Observe(inflight.Sample) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}
func (c *samples) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestInFlightRefusedNotObserved: a call that took a slot of an adaptive
// limit and was then refused by another in-flight limit never ran, so the
// Controller learns nothing from it; a call that ran is observed once.
func TestInFlightRefusedNotObserved(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	ctrl := &samples{}
	adaptive, err := inflight.New(store, "adaptive", 0, inflight.WithController(ctrl))
	if err != nil {
		t.Fatal(err)
	}
	perKey, err := inflight.New(store, "per-key", 1)
	if err != nil {
		t.Fatal(err)
	}
	i, err := New(InFlight("", InFlightLimit{InFlight: adaptive}), InFlight("/svc/", InFlightLimit{InFlight: perKey, Key: Metadata("x-api-key")}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "greedy"))
	release, _, err := i.acquire(ctx, "/svc/M", false)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, _, err := i.acquire(ctx, "/svc/M", false); err == nil {
			t.Fatal("a second call of the key was admitted over its limit of 1")
		}
	}
	if n := ctrl.count(); n != 0 {
		t.Fatalf("the Controller observed %d refused calls, want none", n)
	}
	release(nil)
	if n := ctrl.count(); n != 1 {
		t.Fatalf("the Controller observed %d calls, want the 1 that ran", n)
	}
}

// TestInFlightHeldAfterClientGone: a call's slot is held until its handler
// returns, even when the client has gone (the call's context cancelled) and
// the handler runs past the slot's TTL.
func TestInFlightHeldAfterClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.WithSweepInterval(0))
		defer store.Close()
		slow, err := inflight.New(store, "slow", 1, inflight.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		i, err := New(InFlight("", InFlightLimit{InFlight: slow}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		release, _, err := i.acquire(ctx, "/svc/M", false)
		if err != nil {
			t.Fatal(err)
		}
		cancel()                // the client goes; the handler runs on
		time.Sleep(time.Minute) // twenty TTLs
		if _, _, err := i.acquire(context.Background(), "/svc/M", false); err == nil {
			t.Fatal("a second call was admitted while the first handler runs")
		}
		release(nil)
		next, _, err := i.acquire(context.Background(), "/svc/M", false)
		if err != nil {
			t.Fatalf("a call after the first returned: %v", err)
		}
		next(nil)
	})
}
