// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// TestBeginDeadline: the context a call to Redis is made with ends within
// the store's timeout (plus at most deadlineGrain), or at the caller's own
// deadline when that is sooner; it keeps the caller's values; calls that
// begin together share one deadline; a caller that is already done gets
// its own error and no call is counted.
func TestBeginDeadline(t *testing.T) {
	const timeout = time.Minute
	s, err := configure([]Option{WithTimeout(timeout)})
	if err != nil {
		t.Fatal(err)
	}
	bounds := func(ctx context.Context, lo, hi time.Time) {
		t.Helper()
		d, ok := ctx.Deadline()
		if !ok || d.Before(lo) || d.After(hi) {
			t.Fatalf("deadline %v (set %v), want within [%v, %v]", d, ok, lo, hi)
		}
	}

	before := time.Now()
	a, err := s.begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	bounds(a, before.Add(timeout), after.Add(timeout+deadlineGrain))
	b, err := s.begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(before) < deadlineGrain && b.Done() != a.Done() {
		t.Fatal("two calls begun within deadlineGrain do not share their deadline")
	}

	// The caller's values stay visible to the client (tracing hooks).
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	before = time.Now()
	c, err := s.begin(parent)
	if err != nil {
		t.Fatal(err)
	}
	bounds(c, before.Add(timeout), time.Now().Add(timeout+deadlineGrain))
	if v := c.Value(ctxKey{}); v != "v" {
		t.Fatalf("value %v, want the caller's v", v)
	}

	// A caller's deadline sooner than the timeout is the bound itself.
	soon, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	d, err := s.begin(soon)
	if err != nil {
		t.Fatal(err)
	}
	if d != soon {
		t.Fatal("a caller deadline sooner than the store's timeout is not the call's bound")
	}

	// A caller already done: its error, and Redis is not called.
	calls := s.Stats().Calls
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := s.begin(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("begin with a cancelled context: %v, want context.Canceled", err)
	}
	if s.Stats().Calls != calls {
		t.Fatal("a call with a cancelled context was counted as a call to Redis")
	}

	// With no timeout the caller's context is used as it is.
	s.timeout = 0
	if e, err := s.begin(parent); err != nil || e != parent {
		t.Fatalf("no timeout: begin returned %v, %v; want the caller's context", e, err)
	}
}

// TestBeginDeadlineExpires: a shared deadline context does end, so a call
// to a Redis that never answers returns.
func TestBeginDeadlineExpires(t *testing.T) {
	s, err := configure([]Option{WithTimeout(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := s.begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	<-ctx.Done() // ends within about 2ms; the test's own timeout is the bound
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", ctx.Err())
	}
}
