// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
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
	a, _, err := s.begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	bounds(a, before.Add(timeout), after.Add(timeout+deadlineGrain))
	b, _, err := s.begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(before) < deadlineGrain && b.Done() != a.Done() {
		t.Fatal("two calls begun within deadlineGrain do not share their deadline")
	}

	// The caller's values stay visible to the client (tracing hooks).
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	before = time.Now()
	c, _, err := s.begin(parent)
	if err != nil {
		t.Fatal(err)
	}
	bounds(c, before.Add(timeout), time.Now().Add(timeout+deadlineGrain))
	if v := c.Value(ctxKey{}); v != "v" {
		t.Fatalf("value %v, want the caller's v", v)
	}

	// A caller's deadline sooner than the timeout, less the margin, is the
	// bound (never later; at most deadlineGrain sooner).
	soon, cancel := context.WithTimeout(parent, time.Second)
	defer cancel()
	sd, _ := soon.Deadline()
	leftBefore := time.Until(sd)
	d, c0, err := s.begin(soon)
	byCaller := c0.byCaller
	leftAfter := time.Until(sd)
	if err != nil || !byCaller {
		t.Fatalf("begin: %v, byCaller %v; want the caller's deadline as the bound", err, byCaller)
	}
	// The margin is DefaultDeadlineMargin plus a tenth of the time left.
	bounds(d, sd.Add(-DefaultDeadlineMargin-leftBefore/10-deadlineGrain), sd.Add(-DefaultDeadlineMargin-leftAfter/10))
	if v := d.Value(ctxKey{}); v != "v" {
		t.Fatalf("value %v, want the caller's v", v)
	}
	// With no margin, the caller's context itself is the bound.
	s.margin = 0
	if d, _, err := s.begin(soon); err != nil || d != soon {
		t.Fatal("a caller deadline sooner than the store's timeout is not the call's bound")
	}
	s.margin = DefaultDeadlineMargin

	// A caller with less than the margin left: the call is made, bounded
	// by the caller's own context (no time is left for a failure mode).
	calls := s.Stats().Calls
	hurry, cancelHurry := context.WithTimeout(context.Background(), DefaultDeadlineMargin/2)
	defer cancelHurry()
	if d, c, err := s.begin(hurry); err != nil || d != hurry || !c.byCaller {
		t.Fatalf("begin with %v left: %v, %+v, %v; want the caller's context as the bound", DefaultDeadlineMargin/2, d, c, err)
	}
	if st := s.Stats(); st.Calls != calls+1 {
		t.Fatalf("stats %+v: want one more call", st)
	}

	// A caller already done: its error, and Redis is not called.
	calls = s.Stats().Calls
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, _, err := s.begin(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("begin with a cancelled context: %v, want context.Canceled", err)
	}
	if s.Stats().Calls != calls {
		t.Fatal("a call with a cancelled context was counted as a call to Redis")
	}

	// With no timeout the caller's context is used as it is.
	s.timeout = 0
	if e, _, err := s.begin(parent); err != nil || e != parent {
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
	ctx, _, err := s.begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	<-ctx.Done() // ends within about 2ms; the test's own timeout is the bound
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", ctx.Err())
	}
}

// silentServer listens on a free port and, if accept, accepts connections
// and never answers; otherwise it never accepts (the kernel completes the
// handshakes into the backlog). Everything closes when t ends.
func silentServer(t *testing.T, accept bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	if accept {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	return l.Addr().String()
}

// TestConnectHonoursDeadline: connecting to a Redis that never answers
// (or never accepts) holds up neither Open nor a call longer than the
// caller's deadline: Open returns at once, and a Take with a 50 ms deadline
// returns context.DeadlineExceeded at that deadline less the margin, not
// when the dial's 10 s timeout ends (before the fix, Open blocked for the
// dial timeout and so did the Take). A caller's deadline is no failure of
// Redis: Stats.Errors stays 0. The bounds are loose on purpose (a shared
// machine); the failure they catch is an order of magnitude larger.
func TestConnectHonoursDeadline(t *testing.T) {
	for _, accept := range []bool{true, false} {
		t.Run(map[bool]string{true: "accepts", false: "never-accepts"}[accept], func(t *testing.T) {
			addr := silentServer(t, accept)
			start := time.Now()
			s, err := Open("redis://" + addr + "?dial_timeout=10s")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("Open took %v against a silent server", took)
			}
			p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute}
			for i := range 2 { // the second waits for the attempt still in flight
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				start := time.Now()
				_, err := s.Take(ctx, p, "k", 1)
				took := time.Since(start)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("take %d: %v, want context.DeadlineExceeded", i, err)
				}
				if took > 2*time.Second {
					t.Fatalf("take %d with a 50ms deadline took %v", i, took)
				}
			}
			if st := s.Stats(); st.Errors != 0 || st.CallerTimeouts != 2 {
				t.Errorf("stats %+v: want no errors and 2 caller timeouts", st)
			}
			// Ping and Reset wait no longer either.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start = time.Now()
			if err := s.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
				t.Errorf("ping: %v after %v", err, time.Since(start))
			}
		})
	}
}
