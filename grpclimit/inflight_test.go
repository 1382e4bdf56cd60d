// SPDX-License-Identifier: Apache-2.0

package grpclimit

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

// TestInFlight: a method-wide in-flight limit on the health Watch stream
// (held while the stream is open) refuses with Unavailable and a RetryInfo
// once full, keeps its reserve for critical calls, and frees a slot when a
// stream ends; a per-client limit on Check gives its slot back after each
// call.
func TestInFlight(t *testing.T) {
	store, _ := newStore(t)
	watch, err := inflight.New(store, "watch", 3, inflight.WithReserve(0.34))
	if err != nil {
		t.Fatal(err)
	}
	perKey, err := inflight.New(store, "check", 1)
	if err != nil {
		t.Fatal(err)
	}
	trusted := func(ctx context.Context, _ string) bool {
		v := metadata.ValueFromIncomingContext(ctx, "x-trusted")
		return len(v) > 0 && v[0] == "yes"
	}
	i, err := New(InFlight("/grpc.health.v1.Health/Watch", InFlightLimit{InFlight: watch}),
		InFlight(check, InFlightLimit{InFlight: perKey, Key: Metadata("x-api-key")}),
		WithCriticalFunc(CriticalFrom(trusted)))
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, i, false)
	open := func(ctx context.Context) (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(ctx)
		s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = s.Recv()
		}
		if err != nil {
			cancel()
		}
		return cancel, err
	}
	var streams []context.CancelFunc
	for n := range 2 { // 3 − ⌊3·0.34⌋ non-critical slots
		cancel, err := open(context.Background())
		if err != nil {
			t.Fatalf("stream %d: %v", n, err)
		}
		streams = append(streams, cancel)
	}
	_, err = open(context.Background())
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("third non-critical stream: %v, want Unavailable", err)
	}
	if ri, qf := details(t, err); ri == nil || ri.RetryDelay.AsDuration() != time.Second || qf == nil || qf.Violations[0].Subject != "policy:watch" {
		t.Fatalf("details: RetryInfo %v QuotaFailure %v", ri, qf)
	}
	// Defect 10: the metadata alone claimed the reserve.
	if _, err := open(metadata.AppendToOutgoingContext(context.Background(), CriticalMetadata, "critical")); status.Code(err) != codes.Unavailable {
		t.Fatalf("a critical claim the trust function does not vouch for: %v, want Unavailable", err)
	}
	critical := metadata.AppendToOutgoingContext(context.Background(), CriticalMetadata, "critical", "x-trusted", "yes")
	cancel, err := open(critical)
	if err != nil {
		t.Fatalf("critical stream in the reserve: %v", err)
	}
	streams = append(streams, cancel)
	if _, err := open(critical); status.Code(err) != codes.Unavailable {
		t.Fatalf("critical stream beyond the limit: %v, want Unavailable", err)
	}
	streams[0]()
	// The slot comes back when the server's handler returns, shortly after
	// the cancellation reaches it.
	deadline := time.Now().Add(10 * time.Second)
	waited := uint64(0) // refusals while the cancellation travels
	for {               // 2 held after the cancellation: room for a critical stream
		cancel, err := open(critical)
		if err == nil {
			streams = append(streams, cancel)
			break
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("after a stream ended: %v", err)
		}
		waited++
		time.Sleep(time.Millisecond)
	}
	for _, cancel := range streams {
		cancel()
	}
	for n := range 5 {
		if _, err := c.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("check %d: %v (a per-client slot not given back?)", n, err)
		}
	}
	if st := i.Stats(); st.Refused != 3+waited { // with the untrusted claim
		t.Errorf("stats %+v, want %d refused", st, 3+waited)
	}
}

// TestInFlightLocalRefusal: while the store fails, a per-client in-flight
// limit that fails local refuses a client over its local share as it
// would over the limit (ResourceExhausted, counted as refused), not as a
// limit that fails closed (Unavailable).
func TestInFlightLocalRefusal(t *testing.T) {
	failing := unreachable{} // every call fails: the store is unreachable (a closed one never admits)
	local, _ := newStore(t)
	perKey, err := inflight.New(failing, "check", 2,
		inflight.WithFailureMode(sluice.FailLocal), inflight.WithLocal(local, sluice.FixedReplicas(2)))
	if err != nil {
		t.Fatal(err)
	}
	i, err := New(InFlight(check, InFlightLimit{InFlight: perKey, Key: Metadata("x-api-key")}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "a"))
	release, _, err := i.acquire(ctx, check, false) // the local share, ⌊2/2⌋ = 1
	if err != nil {
		t.Fatalf("within the local share: %v", err)
	}
	defer release(nil)
	if _, _, err := i.acquire(ctx, check, false); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("over the local share: %v, want ResourceExhausted", err)
	}
	if st := i.Stats(); st.Refused != 1 || st.Unavailable != 0 || st.Errors != 2 {
		t.Errorf("Stats() = %+v, want 1 refused, 0 unavailable, 2 errors (the store decided neither call)", st)
	}
}

// TestInFlightClosedStore: over a closed store an in-flight limit cannot
// decide, whatever its failure mode: Unavailable saying the store is closed
// (not that the limit "fails closed" when it fails open, nor, when it
// fails local, a refusal), counted as unavailable, never as refused.
func TestInFlightClosedStore(t *testing.T) {
	for _, mode := range []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed, sluice.FailLocal} {
		store, local := memstore.New(), memstore.New()
		defer local.Close()
		f, err := inflight.New(store, "busy", 2, inflight.WithFailureMode(mode), inflight.WithLocal(local, nil))
		if err != nil {
			t.Fatal(err)
		}
		store.Close()
		i, err := New(InFlight("", InFlightLimit{InFlight: f}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = i.Unary()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: check}, func(context.Context, any) (any, error) { return nil, nil })
		if want := `grpclimit: in-flight limit "busy" cannot decide: its store is closed`; status.Code(err) != codes.Unavailable || status.Convert(err).Message() != want {
			t.Errorf("%v: %v; want Unavailable: %s", mode, err, want)
		}
		if st := i.Stats(); st.Unavailable != 1 || st.Refused != 0 || st.Admitted != 0 {
			t.Errorf("%v: stats %+v, want 1 unavailable, none refused or admitted", mode, st)
		}
	}
}
