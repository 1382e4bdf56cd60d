// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

func limiter(t *testing.T, store sluice.Store, name string, limit int64, opts ...sluice.Option) *sluice.Limiter {
	t.Helper()
	l, err := sluice.NewLimiter(store, sluice.Policy{Name: name, Algorithm: sluice.FixedWindow, Limit: limit, Period: time.Hour}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newStore(t *testing.T) *memstore.Store {
	t.Helper()
	s := memstore.New(memstore.WithClock(sluicetest.NewClock(time.Unix(0, 0))), memstore.WithSweepInterval(0))
	t.Cleanup(func() { s.Close() })
	return s
}

// Classify's table: each failure mode, the caller gone, and a batch that
// decided nothing.
func TestClassify(t *testing.T) {
	store := newStore(t)
	open := limiter(t, store, "open", 1)
	closed := limiter(t, store, "closed", 1, sluice.WithFailureMode(sluice.FailClosed))
	errStore := errors.New("store down")
	admit := sluice.Decision{Allowed: true, Delay: time.Second}
	refuse := sluice.Decision{RetryAfter: 3 * time.Second}
	impossible := sluice.Decision{Impossible: true}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name       string
		ctx        context.Context
		checks     []sluice.Check
		ds         []sluice.Decision
		err        error
		want       Outcome
		wait       time.Duration
		impossible bool
		failed     bool
	}{
		{"admit", context.Background(), []sluice.Check{{Limiter: open}}, []sluice.Decision{admit}, nil, Admit, time.Second, false, false},
		{"refuse", context.Background(), []sluice.Check{{Limiter: open}, {Limiter: closed}}, []sluice.Decision{admit, refuse}, nil, Refuse, 3 * time.Second, false, false},
		{"impossible", context.Background(), []sluice.Check{{Limiter: open}}, []sluice.Decision{impossible}, nil, Refuse, 0, true, false},
		{"failed open", context.Background(), []sluice.Check{{Limiter: open}}, []sluice.Decision{{Allowed: true}}, errStore, Admit, 0, false, true},
		{"failed closed", context.Background(), []sluice.Check{{Limiter: open}, {Limiter: closed}}, []sluice.Decision{{Allowed: true}, {}}, errStore, Unavailable, 0, false, true},
		{"failed local refusal is never impossible", context.Background(), []sluice.Check{{Limiter: open}}, []sluice.Decision{impossible}, errStore, Refuse, 0, false, true},
		{"nothing decided", context.Background(), []sluice.Check{{Limiter: open}}, nil, errStore, Unavailable, 0, false, true},
		{"nothing decided, no error", context.Background(), []sluice.Check{{Limiter: open}}, nil, nil, Unavailable, 0, false, true},
		{"gone, store error", cancelled, []sluice.Check{{Limiter: open}}, []sluice.Decision{{Allowed: true}}, context.Canceled, Gone, 0, false, false},
		{"gone, store answered", cancelled, []sluice.Check{{Limiter: open}}, []sluice.Decision{admit}, nil, Gone, 0, false, false},
	} {
		v := Classify(c.ctx, c.checks, sluice.Result{Decisions: c.ds}, c.err)
		if v.Outcome != c.want || v.Wait != c.wait || v.Impossible != c.impossible || v.StoreFailed() != c.failed {
			t.Errorf("%s: %v wait %v impossible %v failed %v; want %v %v %v %v", c.name, v.Outcome, v.Wait, v.Impossible, v.StoreFailed(), c.want, c.wait, c.impossible, c.failed)
		}
	}
}

// A request only a shadow check refuses is decided again without it: it is
// admitted and consumes what it would have without the shadow check.
func TestDecideShadow(t *testing.T) {
	store := newStore(t)
	enforced := limiter(t, store, "enforced", 2)
	shadow := limiter(t, store, "shadow", 1)
	q := Request{Checks: []sluice.Check{{Limiter: enforced, Key: "k", Cost: 1}, {Limiter: shadow, Key: "k", Cost: 1}}, Enforced: 1}
	ctx := context.Background()
	for n, want := range []struct {
		outcome     Outcome
		shadowRefus bool
	}{{Admit, false}, {Admit, true}, {Refuse, true}} {
		v := Decide(ctx, q)
		if v.Outcome != want.outcome || (len(v.Shadow) == 1 && !v.Shadow[0].Allowed) != want.shadowRefus {
			t.Errorf("request %d: %v shadow %+v; want %v, shadow refusal %v", n, v.Outcome, v.Shadow, want.outcome, want.shadowRefus)
		}
	}
}

// A cancelled caller is Gone before anything is asked of the store.
func TestDecideGone(t *testing.T) {
	store := newStore(t)
	l := limiter(t, store, "hourly", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		if v := Decide(ctx, Request{Checks: []sluice.Check{{Limiter: l, Key: "k", Cost: 1}}, Enforced: 1}); v.Outcome != Gone || v.StoreFailed() {
			t.Fatalf("%v (store failed %v); want Gone, no store failure", v.Outcome, v.StoreFailed())
		}
	}
	if d, _ := l.Allow(context.Background(), "k"); !d.Allowed {
		t.Fatal("a gone caller consumed the limit")
	}
}

// KeyOf: a missing key is shared by default, refused by Reject, skipped by
// Skip; a present key is used as it is.
func TestKeyOf(t *testing.T) {
	for _, c := range []struct {
		key         string
		ok          bool
		m           Missing
		want        string
		use, reject bool
	}{
		{"k", true, Skip, "k", true, false},
		{"", false, Share, MissingKey, true, false},
		{"", false, Reject, "", false, true},
		{"", false, Skip, "", false, false},
	} {
		k, use, reject := KeyOf(c.key, c.ok, c.m)
		if k != c.want || use != c.use || reject != c.reject {
			t.Errorf("KeyOf(%q, %v, %d) = %q, %v, %v", c.key, c.ok, c.m, k, use, reject)
		}
	}
	if k, ok := Key("  x "); !ok || k != "x" {
		t.Errorf("Key trims: %q %v", k, ok)
	}
	long := strings.Repeat("v", MaxKeyLen)
	if k, ok := Key(long + "y"); !ok || len(k) != len("sha256:")+64 {
		t.Errorf("Key hashes a long value: %q", k)
	}
}

// Counts counts each verdict once, by outcome but admission (Passed counts
// a request let through, once); a store failure (once per request, however
// many of its limits failed) and each shadow refusal on top.
func TestCounts(t *testing.T) {
	var c Counts
	for _, v := range []Verdict{
		{Outcome: Admit},
		{Outcome: Admit, Wait: time.Second},
		{Outcome: Refuse, Shadow: []sluice.Decision{{}, {Allowed: true}}},
		{Outcome: Unavailable, Err: errors.New("down")},
		{Outcome: Gone, Err: context.Canceled},
	} {
		c.Verdict(&v)
	}
	if !c.Taken(Taken{Outcome: Admit, Err: errors.New("down")}, false) { // admitted failing open
		t.Error("Taken of a store failure: the request's failure not reported counted")
	}
	// The same request's next limit fails too: Errors counts requests.
	if !c.Taken(Taken{Outcome: Admit, Err: errors.New("down")}, true) {
		t.Error("Taken after a failure: the request's failure forgotten")
	}
	if c.Taken(Taken{Outcome: Refuse}, false) {
		t.Error("Taken of a refusal: reported a store failure")
	}
	c.NoKey()
	c.Passed()
	c.Passed()
	got := [...]uint64{c.Admitted.Load(), c.Delayed.Load(), c.Refused.Load(), c.ShadowRefused.Load(), c.Unavailable.Load(), c.Gone.Load(), c.Errors.Load(), c.Malformed.Load()}
	if want := [...]uint64{2, 1, 2, 1, 1, 1, 2, 1}; got != want {
		t.Errorf("admitted, delayed, refused, shadow refused, unavailable, gone, errors, malformed = %v; want %v", got, want)
	}
}

// Jitter lengthens a refusal's wait by less than Jitter, never shortens it.
func TestDecideJitter(t *testing.T) {
	store := newStore(t)
	l := limiter(t, store, "hourly", 1)
	q := Request{Checks: []sluice.Check{{Limiter: l, Key: "k", Cost: 1}}, Enforced: 1, Jitter: time.Minute}
	Decide(context.Background(), q)
	for range 20 {
		v := Decide(context.Background(), q)
		if v.Outcome != Refuse || v.Wait < time.Hour || v.Wait >= time.Hour+time.Minute {
			t.Fatalf("%v wait %v; want a refusal waiting [1h, 1h1m)", v.Outcome, v.Wait)
		}
	}
}
