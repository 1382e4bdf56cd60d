// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestPeekAnswersAsCostOne: a peek (cost 0) answers as a request of cost 1
// would at that moment, and spends nothing: admitted from this process's
// live block while the store has nothing left (it asked the store alone,
// which refused, while the request was admitted from the block); refused
// once the block is spent; then, while the store's refusal is reused, with
// that request's RetryAfter.
func TestPeekAnswersAsCostOne(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	mem := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	defer mem.Close()
	p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute}
	ls := lease.New(mem, lease.WithClock(clock))
	l, err := sluice.NewLimiter(ls, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allow := func(n int64) sluice.Decision {
		t.Helper()
		d, err := l.AllowN(ctx, "k", n)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	allow(1)
	clock.Advance(time.Millisecond)
	if d := allow(1); !d.Allowed { // a block of 2: 1 unit left here
		t.Fatal(d)
	}
	// Another process takes what the store has left.
	if d, err := mem.Take(ctx, p, "k", 97); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	peeks := []sluice.Decision{allow(0), allow(0)} // twice: the first spent nothing
	one := allow(1)
	for _, d := range peeks {
		if !one.Allowed || d != one {
			t.Fatalf("a peek with a unit left in the block: %+v; the request of cost 1 after: %+v; want both admitted from the block, alike", d, one)
		}
	}
	peek := allow(0)
	one = allow(1)
	if peek.Allowed || one.Allowed {
		t.Fatalf("with the block spent and the store empty: peek %+v, request %+v; want both refused", peek, one)
	}
	// The refusal is now reused: the peek gives the same RetryAfter.
	clock.Advance(time.Second)
	peek = allow(0)
	one = allow(1)
	if peek.Allowed || one.Allowed || peek.RetryAfter != one.RetryAfter || peek.RetryAfter <= 0 {
		t.Fatalf("while a refusal is reused: peek %+v, request %+v; want both refused with one RetryAfter", peek, one)
	}
	if s := ls.Stats(p); s.Spent != 3 {
		t.Fatalf("units spent from blocks: %d, want 3 (peeks spend none)", s.Spent)
	}
}
