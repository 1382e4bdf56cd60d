// SPDX-License-Identifier: Apache-2.0

package grpclimit

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
)

// TestClosedStoreIsNotResourceExhausted: a call the limiter could not
// decide at all (a closed store) is Unavailable, not ResourceExhausted with
// a QuotaFailure and a RetryInfo of 0 s (as it was).
func TestClosedStoreIsNotResourceExhausted(t *testing.T) {
	store, _ := newStore(t)
	l := newLimiter(t, store, sluice.Policy{Name: "per-key", Algorithm: sluice.GCRA, Limit: 2, Period: time.Minute})
	i, err := New(Global(Limit{Limiter: l, Key: Metadata("x-api-key")}))
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-api-key", "k1"))
	reached := false
	_, err = i.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: check}, func(context.Context, any) (any, error) {
		reached = true
		return nil, nil
	})
	if reached {
		t.Fatal("a closed store admitted the call")
	}
	if status.Code(err) == codes.ResourceExhausted {
		ri, qf := details(t, err)
		t.Errorf("closed store: %v (RetryInfo %v, QuotaFailure %v); want Unavailable, not a quota refusal", err, ri, qf)
	}
	if st := i.Stats(); st.Refused != 0 {
		t.Errorf("closed store counted as %d refusals by a limit", st.Refused)
	}
}
