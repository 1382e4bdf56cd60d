// SPDX-License-Identifier: Apache-2.0

package grpclimit

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

// TestLeakyDelayPastDeadline: a call whose leaky-bucket queue delay would
// pass its own deadline (a gRPC client sets it) returns DeadlineExceeded at
// once and takes no place in the queue, so the callers after it are not
// delayed for a call that never ran.
func TestLeakyDelayPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, _ := newStore(t)
		l := newLimiter(t, store, sluice.Policy{Name: "q", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 10})
		i, err := New(Global(Limit{Limiter: l, Key: func(context.Context, string) (string, bool) { return "k", true }}))
		if err != nil {
			t.Fatal(err)
		}
		unary, info := i.Unary(), &grpc.UnaryServerInfo{FullMethod: "/svc.S/M"}
		reached := 0
		h := func(context.Context, any) (any, error) { reached++; return nil, nil }
		if _, err := unary(context.Background(), nil, info, h); err != nil {
			t.Fatal(err)
		}
		// The next call of k waits 1 s; this one has 100 ms.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := unary(ctx, nil, info, h); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("a call whose delay passes its deadline: %v, want DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("it waited %v, want an answer at once", waited)
		}
		if p, _ := l.AllowN(context.Background(), "k", 0); p.Delay != time.Second {
			t.Fatalf("queue delay %v after it, want 1s (no place taken)", p.Delay)
		}
		if st := i.Stats(); reached != 1 || st.Admitted != 1 || st.Gone != 1 {
			t.Fatalf("handler reached %d times, stats %+v", reached, st)
		}
	})
}

// TestAdmittedInFlightOnly: with only an in-flight limit, Stats.Admitted
// counts the calls let through.
func TestAdmittedInFlightOnly(t *testing.T) {
	store, _ := newStore(t)
	f, err := inflight.New(store, "slots", 4)
	if err != nil {
		t.Fatal(err)
	}
	i, err := New(InFlight("", InFlightLimit{InFlight: f}))
	if err != nil {
		t.Fatal(err)
	}
	reached := 0
	h := func(context.Context, any) (any, error) { reached++; return nil, nil }
	for range 3 {
		if _, err := i.Unary()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/svc.S/M"}, h); err != nil {
			t.Fatal(err)
		}
	}
	if st := i.Stats(); reached != 3 || st.Admitted != 3 {
		t.Fatalf("%d calls let through; stats %+v, want Admitted 3", reached, st)
	}
}

// TestErrorsCountCalls: Stats.Errors counts the calls the store could not
// decide, once each: with a rate limit and two in-flight limits over a
// store that is down (all failing open, the defaults), 3 calls are 3
// errors, not one per failed limit.
func TestErrorsCountCalls(t *testing.T) {
	mem, _ := newStore(t)
	store := &outage{Store: mem}
	store.down.Store(true)
	rate := newLimiter(t, store, sluice.Policy{Name: "per-key", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second})
	var limits []InFlightLimit
	for _, name := range []string{"busy", "per-key-conc"} {
		f, err := inflight.New(unreachable{}, name, 8)
		if err != nil {
			t.Fatal(err)
		}
		limits = append(limits, InFlightLimit{InFlight: f, Key: Metadata("x-api-key")})
	}
	i, err := New(Global(Limit{Limiter: rate, Key: Metadata("x-api-key")}), InFlight("", limits[0]), InFlight("/svc.S/", limits[1]))
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k1"))
	h := func(context.Context, any) (any, error) { return nil, nil }
	const n = 3
	for range n {
		if _, err := i.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/svc.S/M"}, h); err != nil {
			t.Fatalf("a call over a store that is down, every limit failing open: %v", err)
		}
	}
	if st := i.Stats(); st.Errors != n || st.Admitted != n {
		t.Fatalf("%d calls, each undecided by the store; stats %+v, want Errors %d, Admitted %d", n, st, n, n)
	}
}
